package managertest

import (
	"os/exec"
	"path/filepath"
	"testing"
)

// Build builds cmd/initlock-manager into a temporary folder of t, with the
// version a release would set (v0.0.0-test) and, as a release, no VCS
// stamp, and returns the binary's path.
func Build(t *testing.T) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "initlock-manager")
	cmd := exec.CommandContext(t.Context(), "go", "build", "-buildvcs=false", "-o", bin,
		"-ldflags", "-X github.com/initlock/initlock/internal/version.version=v0.0.0-test",
		"github.com/initlock/initlock/cmd/initlock-manager")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	return bin
}
