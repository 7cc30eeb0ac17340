package notes_test

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/initlock/initlock/hack/release/notes"
)

func TestChanges(t *testing.T) {
	dir := t.TempDir()
	git := func(args ...string) {
		t.Helper()
		cmd := exec.Command("git", args...)
		cmd.Dir = dir
		cmd.Env = append(os.Environ(), "GIT_AUTHOR_NAME=a", "GIT_AUTHOR_EMAIL=a@example.com", "GIT_COMMITTER_NAME=a", "GIT_COMMITTER_EMAIL=a@example.com")
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("git %v: %v\n%s", args, err, out)
		}
	}
	commit := func(subject string) {
		t.Helper()
		if err := os.WriteFile(filepath.Join(dir, "f"), []byte(subject), 0o600); err != nil {
			t.Fatal(err)
		}
		git("add", "f")
		git("commit", "-q", "-m", subject)
	}
	git("init", "-q")
	commit("first")
	commit("second")

	got, err := notes.Changes(dir, "v0.1.0")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(got, "## Changes since the first commit (2 commits)\n\n- second (") || !strings.Contains(got, "\n- first (") {
		t.Fatalf("without a tag:\n%s", got)
	}

	git("tag", "v0.1.0")
	commit("third")
	git("tag", "v0.2.0") // the release being made, on HEAD
	got, err = notes.Changes(dir, "v0.2.0")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(got, "## Changes since v0.1.0 (1 commits)\n\n- third (") || strings.Contains(got, "second") {
		t.Fatalf("since v0.1.0:\n%s", got)
	}
}

// README.md and docs/install.md show the same compatibility table, the one
// the release notes copy.
func TestOneCompatibilityTable(t *testing.T) {
	root := filepath.Join("..", "..", "..")
	want, err := notes.Compatibility(root)
	if err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(filepath.Join(root, "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	got, err := notes.CompatibilityTable(string(b))
	if err != nil {
		t.Fatalf("README.md: %v", err)
	}
	if got != want {
		t.Errorf("README.md's compatibility table differs from docs/install.md's:\n%s\nvs\n%s", got, want)
	}
	if !strings.HasPrefix(want, "| initlock | Cluster API | Kubernetes (management cluster) | Velero |\n") {
		t.Errorf("the compatibility table has other columns:\n%s", want)
	}
}
