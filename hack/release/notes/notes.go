package notes

import (
	"bytes"
	"fmt"
	"os/exec"
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
