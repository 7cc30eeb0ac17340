package cli_test

import (
	"testing"

	clisuite "github.com/initlock/initlock/test/cli"
)

// The commands' cases (test/cli) against the model API server, with the
// project's lock guard: no control plane. The same cases run against the
// real API server there, with the cases that need it (authorisation, the
// garbage collector, discovery, Velero's restore, kinds the model does not
// serve).
func TestCommands(t *testing.T) {
	b, err := clisuite.Model()
	if err != nil {
		t.Fatal(err)
	}
	clisuite.Run(t, b)
}
