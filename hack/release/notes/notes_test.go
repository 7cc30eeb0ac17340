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

func TestCompatibilityRow(t *testing.T) {
	md := "text\n<!-- compatibility: x -->\n| initlock | Cluster API |\n| --- | --- |\n| v0.10 | old |\n| v0.1 (no tag yet) | v1.11 to v1.14 |\n| v1.1 | later |\n<!-- end of compatibility -->\n"
	got, err := notes.CompatibilityRow(md, "v0.1.0-rc.1")
	if err != nil {
		t.Fatal(err)
	}
	if want := "| initlock | Cluster API |\n| --- | --- |\n| v0.1.0-rc.1 | v1.11 to v1.14 |\n"; got != want {
		t.Errorf("got\n%s\nwant\n%s", got, want)
	}
	if got, err := notes.CompatibilityRow(md, "v0.10.2"); err != nil || !strings.Contains(got, "| v0.10.2 | old |") {
		t.Errorf("v0.10.2: %q, %v", got, err)
	}
	if _, err := notes.CompatibilityRow(md, "v0.2.0"); err == nil || !strings.Contains(err.Error(), "no row for v0.2") {
		t.Errorf("v0.2.0: %v, want no row", err)
	}
}

func TestUpgradeSections(t *testing.T) {
	md := "# Upgrade notes\n\n## v0.2\n\n### Changed defaults\n\nNone.\n\n### Upgrade notes\n\nRun this:\n\n```sh\n# a comment, not a heading\nkubectl apply\n```\n\nThen that.\n\n## v0.1\n\n### Changed defaults\n\n- `--x` is off.\n\n### Upgrade notes\n\n"
	cd, un, err := notes.UpgradeSections(md, "v0.2.1")
	if err != nil {
		t.Fatal(err)
	}
	if cd != "None." || un != "Run this:\n\n```sh\n# a comment, not a heading\nkubectl apply\n```\n\nThen that." {
		t.Errorf("v0.2: %q, %q", cd, un)
	}
	if _, _, err := notes.UpgradeSections(md, "v0.1.0"); err == nil || !strings.Contains(err.Error(), `"### Upgrade notes"`) {
		t.Errorf("v0.1 with empty upgrade notes: %v", err)
	}
	if _, _, err := notes.UpgradeSections(md, "v0.3.0"); err == nil || !strings.Contains(err.Error(), `"## v0.3"`) {
		t.Errorf("v0.3: %v", err)
	}
}

// docs/upgrade-notes.md has the sections of the series the compatibility
// table has a row for (make release needs both).
func TestUpgradeNotesOfThisSeries(t *testing.T) {
	root := filepath.Join("..", "..", "..")
	b, err := os.ReadFile(filepath.Join(root, "docs", "install.md"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := notes.CompatibilityRow(string(b), "v0.1.0"); err != nil {
		t.Fatal(err)
	}
	if _, _, err := notes.Upgrade(root, "v0.1.0"); err != nil {
		t.Fatal(err)
	}
}
