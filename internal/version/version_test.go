package version

import (
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
)

// TestLinkTimeVersion builds a program that prints Get with the version and
// revision set at link time, as a release build does.
func TestLinkTimeVersion(t *testing.T) {
	bin := filepath.Join(t.TempDir(), "print")
	pkg := "github.com/initlock/initlock/internal/version"
	build := exec.CommandContext(t.Context(), "go", "build", "-o", bin,
		"-ldflags", "-X "+pkg+".version=v1.2.3 -X "+pkg+".revision=0123456789abcdef", "./testdata/print")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	out, err := exec.CommandContext(t.Context(), bin).Output()
	if err != nil {
		t.Fatal(err)
	}
	want := "v1.2.3|0123456789abcdef|v1.2.3 (" + runtime.Version() + ", " + runtime.GOOS + "/" + runtime.GOARCH + ")"
	if string(out) != want {
		t.Fatalf("got %q, want %q", out, want)
	}
}

// TestUnsetVersion: a test binary has no link-time version; Get still
// names one.
func TestUnsetVersion(t *testing.T) {
	i := Get()
	if i.Version == "" || !strings.HasPrefix(i.GoVersion, "go") || i.Platform != runtime.GOOS+"/"+runtime.GOARCH {
		t.Fatalf("Get() = %+v", i)
	}
}
