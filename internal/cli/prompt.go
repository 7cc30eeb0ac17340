package cli

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"strings"
)

// confirm asks a yes/no question on the error stream, so that it is seen
// when the output is piped, and reads the answer from the input stream,
// terminal or not; only "y" or "yes" is yes, and no answer is no.
func (a *app) confirm(question string) (bool, error) {
	if _, err := fmt.Fprint(a.opts.IOStreams.ErrOut, question); err != nil {
		return false, err
	}
	line, err := bufio.NewReader(a.opts.IOStreams.In).ReadString('\n')
	if errors.Is(err, io.EOF) && strings.TrimSpace(line) == "" {
		_, _ = fmt.Fprintln(a.opts.IOStreams.ErrOut, "(no answer)")
		return false, nil
	}
	if err != nil && !errors.Is(err, io.EOF) {
		return false, fmt.Errorf("reading the answer: %w", err)
	}
	switch strings.ToLower(strings.TrimSpace(line)) {
	case "y", "yes":
		return true, nil
	}
	return false, nil
}
