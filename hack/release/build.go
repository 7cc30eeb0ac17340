package main

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/initlock/initlock/hack/release/notes"
)

// module is the path of initlock's main module.
const module = "github.com/initlock/initlock"

// release holds what the steps of one run share.
type release struct {
	o        options
	epoch    time.Time
	revision string
	// tmp holds the binaries, by platform.
	tmp string
	// archiveNames are the kubectl-initlock archives, by platform.
	archiveNames map[string]string
}

func newRelease(o options) (*release, error) {
	r := &release{o: o, archiveNames: map[string]string{}}
	rev, err := r.git("rev-parse", "HEAD")
	if err != nil {
		return nil, err
	}
	r.revision = rev
	epoch := os.Getenv("SOURCE_DATE_EPOCH")
	if epoch == "" {
		if epoch, err = r.git("log", "-1", "--format=%ct"); err != nil {
			return nil, err
		}
	}
	secs, err := strconv.ParseInt(epoch, 10, 64)
	if err != nil {
		return nil, fmt.Errorf("SOURCE_DATE_EPOCH=%q is not a number of seconds: %w", epoch, err)
	}
	r.epoch = time.Unix(secs, 0).UTC()
	if r.tmp, err = os.MkdirTemp("", "initlock-release-"); err != nil {
		return nil, err
	}
	return r, nil
}

func (r *release) cleanup() { _ = os.RemoveAll(r.tmp) }

func (r *release) git(args ...string) (string, error) {
	out, err := notes.Git(r.o.root, args...)
	return strings.TrimSpace(out), err
}

// build builds the commands of cmd/ named by cmds for a platform
// ("linux/arm64") and returns the folder holding them. The binaries are
// built by the main module alone (GOWORK=off: its go.mod decides every
// version), static, stripped, without VCS stamp or build id, and report the
// release version and revision (package internal/version).
func (r *release) build(platform string, cmds ...string) (string, error) {
	goos, goarch, ok := strings.Cut(platform, "/")
	if !ok {
		return "", fmt.Errorf("platform %q is not os/arch", platform)
	}
	dir := filepath.Join(r.tmp, goos+"_"+goarch)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", err
	}
	ldflags := "-s -w -buildid= -X " + module + "/internal/version.version=" + r.o.version + " -X " + module + "/internal/version.revision=" + r.revision
	args := []string{"build", "-trimpath", "-buildvcs=false", "-ldflags", ldflags, "-o", dir + "/"}
	for _, c := range cmds {
		args = append(args, "./cmd/"+c)
	}
	cmd := exec.Command("go", args...)
	cmd.Dir = r.o.root
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0", "GOOS="+goos, "GOARCH="+goarch, "GOFLAGS=", "GOWORK=off")
	cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
	start := time.Now()
	if err := cmd.Run(); err != nil {
		return "", fmt.Errorf("building %s for %s: %w", strings.Join(cmds, ", "), platform, err)
	}
	fmt.Fprintf(os.Stderr, "release: built %s for %s in %s\n", strings.Join(cmds, ", "), platform, time.Since(start).Round(time.Second))
	return dir, nil
}
