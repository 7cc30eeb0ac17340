package cli_test

import (
	"strings"
	"testing"

	"github.com/initlock/initlock/internal/cli"
)

func TestVersion(t *testing.T) {
	r := run(t, "version")
	r.expectCode(t, cli.ExitOK)
	if !strings.HasPrefix(r.out, "kubectl-initlock v0.0.0-test (go") {
		t.Errorf("version output: %q", r.out)
	}
	if v := cli.DefaultVersion(); v == "" {
		t.Error("DefaultVersion is empty")
	}
}
