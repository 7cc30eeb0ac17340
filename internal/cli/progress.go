package cli

import (
	"fmt"
	"io"
	"strings"
)

// progressBar draws "[#####.....] 12/40" on one terminal line, redrawn in
// place with a carriage return.
type progressBar struct {
	w           io.Writer
	total, done int
}

const progressWidth = 30

func newProgressBar(w io.Writer, total int) *progressBar {
	b := &progressBar{w: w, total: total}
	b.draw()
	return b
}

func (b *progressBar) draw() {
	filled := progressWidth * b.done / b.total
	_, _ = fmt.Fprintf(b.w, "\rrepairing [%s%s] %d/%d", strings.Repeat("#", filled), strings.Repeat(".", progressWidth-filled), b.done, b.total)
}

func (b *progressBar) step() {
	b.done++
	b.draw()
}

// printAbove prints a line above the bar and draws the bar again.
func (b *progressBar) printAbove(line string) {
	_, _ = fmt.Fprintf(b.w, "\r\x1b[2K%s\n", line)
	b.draw()
}

func (b *progressBar) finish() {
	_, _ = fmt.Fprintln(b.w)
}
