package notes

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
)

// Changes returns the Markdown change list of a release of version made
// from HEAD of the git repository in dir.
func Changes(dir, version string) (string, error) {
	prev, err := previousTag(dir, version)
	if err != nil {
		return "", err
	}
	rangeArg, title := "HEAD", "Changes since the first commit"
	if prev != "" {
		rangeArg, title = prev+"..HEAD", "Changes since "+prev
	}
	out, err := git(dir, "log", "--no-merges", "--format=%h%x09%s", rangeArg)
	if err != nil {
		return "", err
	}
	var b strings.Builder
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if strings.TrimSpace(out) == "" {
		lines = nil
	}
	fmt.Fprintf(&b, "## %s (%d commits)\n\n", title, len(lines))
	for _, l := range lines {
		hash, subject, _ := strings.Cut(l, "\t")
		fmt.Fprintf(&b, "- %s (%s)\n", subject, hash)
	}
	return b.String(), nil
}

// previousTag is the highest version tag reachable from HEAD other than
// version and not on HEAD itself; "" when there is none.
func previousTag(dir, version string) (string, error) {
	out, err := git(dir, "tag", "--merged", "HEAD", "--sort=-v:refname", "--list", "v*")
	if err != nil {
		return "", err
	}
	head, err := git(dir, "rev-parse", "HEAD")
	if err != nil {
		return "", err
	}
	for _, tag := range strings.Fields(out) {
		if tag == version {
			continue
		}
		c, err := git(dir, "rev-list", "-n", "1", tag)
		if err != nil {
			return "", err
		}
		if strings.TrimSpace(c) != strings.TrimSpace(head) {
			return tag, nil
		}
	}
	return "", nil
}

func git(dir string, args ...string) (string, error) {
	cmd := exec.Command("git", args...)
	cmd.Dir = dir
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return "", fmt.Errorf("git %s: %w: %s", strings.Join(args, " "), err, strings.TrimSpace(stderr.String()))
	}
	return string(out), nil
}

// Compatibility markers delimit the one compatibility table, in
// docs/install.md and README.md alike.
const (
	compatibilityStart = "<!-- compatibility:"
	compatibilityEnd   = "<!-- end of compatibility -->"
)

// Compatibility returns the compatibility table of docs/install.md in the
// work tree root, without its markers.
func Compatibility(root string) (string, error) {
	b, err := os.ReadFile(filepath.Join(root, "docs", "install.md"))
	if err != nil {
		return "", err
	}
	return CompatibilityTable(string(b))
}

// CompatibilityTable returns the compatibility table of a Markdown text,
// without its markers.
func CompatibilityTable(markdown string) (string, error) {
	_, rest, ok := strings.Cut(markdown, compatibilityStart)
	if !ok {
		return "", fmt.Errorf("no compatibility table (%s ... %s)", compatibilityStart, compatibilityEnd)
	}
	_, rest, _ = strings.Cut(rest, "-->\n")
	table, _, ok := strings.Cut(rest, compatibilityEnd)
	if !ok {
		return "", fmt.Errorf("the compatibility table does not end with %s", compatibilityEnd)
	}
	return table, nil
}
