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
	out, err := Git(dir, "log", "--no-merges", "--format=%h%x09%s", rangeArg)
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
	out, err := Git(dir, "tag", "--merged", "HEAD", "--sort=-v:refname", "--list", "v*")
	if err != nil {
		return "", err
	}
	head, err := Git(dir, "rev-parse", "HEAD")
	if err != nil {
		return "", err
	}
	for _, tag := range strings.Fields(out) {
		if tag == version {
			continue
		}
		c, err := Git(dir, "rev-list", "-n", "1", tag)
		if err != nil {
			return "", err
		}
		if strings.TrimSpace(c) != strings.TrimSpace(head) {
			return tag, nil
		}
	}
	return "", nil
}

// Git runs git with args in dir and returns its output; its error names
// the command and holds what git wrote on stderr.
func Git(dir string, args ...string) (string, error) {
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

// CompatibilityRow returns the compatibility table of a Markdown text cut
// down to its header and the row of version's release series (the row whose
// first cell starts with vMAJOR.MINOR), that cell replaced by version.
func CompatibilityRow(markdown, version string) (string, error) {
	table, err := CompatibilityTable(markdown)
	if err != nil {
		return "", err
	}
	series, err := seriesOf(version)
	if err != nil {
		return "", err
	}
	lines := strings.Split(strings.TrimSpace(table), "\n")
	if len(lines) < 3 {
		return "", fmt.Errorf("the compatibility table has no row:\n%s", table)
	}
	for _, l := range lines[2:] {
		cells := strings.SplitN(l, "|", 3)
		if len(cells) < 3 {
			continue
		}
		first := strings.TrimSpace(cells[1])
		rest, ok := strings.CutPrefix(first, series)
		if !ok || (rest != "" && (rest[0] == '.' || rest[0] >= '0' && rest[0] <= '9')) {
			continue
		}
		return lines[0] + "\n" + lines[1] + "\n| " + version + " |" + cells[2] + "\n", nil
	}
	return "", fmt.Errorf("the compatibility table has no row for %s: add one", series)
}

// seriesOf returns vMAJOR.MINOR of a version vMAJOR.MINOR.PATCH[-pre].
func seriesOf(version string) (string, error) {
	parts := strings.SplitN(version, ".", 3)
	if len(parts) != 3 || !strings.HasPrefix(version, "v") {
		return "", fmt.Errorf("%q is not vMAJOR.MINOR.PATCH", version)
	}
	return parts[0] + "." + parts[1], nil
}

// UpgradeNotesFile is where the changed defaults and upgrade notes of
// every release series are written, by hand, before its first release.
const UpgradeNotesFile = "docs/upgrade-notes.md"

// Upgrade sections, in the order of the release notes.
const (
	ChangedDefaults = "Changed defaults"
	UpgradeNotes    = "Upgrade notes"
)

// Upgrade returns the sections ChangedDefaults and UpgradeNotes of
// version's release series in UpgradeNotesFile of the work tree root.
func Upgrade(root, version string) (changedDefaults, upgradeNotes string, err error) {
	b, err := os.ReadFile(filepath.Join(root, filepath.FromSlash(UpgradeNotesFile)))
	if err != nil {
		return "", "", err
	}
	return UpgradeSections(string(b), version)
}

// UpgradeSections returns, from a Markdown text, the bodies of the level-3
// sections ChangedDefaults and UpgradeNotes under the level-2 section named
// by version's release series ("## v0.1"). Both must be there and say
// something ("None." is something).
func UpgradeSections(markdown, version string) (changedDefaults, upgradeNotes string, err error) {
	series, err := seriesOf(version)
	if err != nil {
		return "", "", err
	}
	body, ok := section(markdown, "## ", series)
	if !ok {
		return "", "", fmt.Errorf("%s has no section \"## %s\": write its changed defaults and upgrade notes there", UpgradeNotesFile, series)
	}
	var out [2]string
	for i, name := range []string{ChangedDefaults, UpgradeNotes} {
		sub, ok := section(body, "### ", name)
		if !ok || sub == "" {
			return "", "", fmt.Errorf("%s: section %s has no \"### %s\", or it is empty (write \"None.\" when there are none)", UpgradeNotesFile, series, name)
		}
		out[i] = sub
	}
	return out[0], out[1], nil
}

// section returns the trimmed body of the section whose heading is prefix
// followed by name, up to the next heading of the same or a higher level.
// Lines of fenced code blocks are never headings.
func section(markdown, prefix, name string) (string, bool) {
	lines := strings.Split(markdown, "\n")
	level := strings.Count(prefix, "#")
	fenced := false
	for i, l := range lines {
		if strings.HasPrefix(l, "```") {
			fenced = !fenced
		}
		if fenced || !strings.HasPrefix(l, prefix) || strings.TrimSpace(strings.TrimPrefix(l, prefix)) != name {
			continue
		}
		var body []string
		inner := false
		for _, m := range lines[i+1:] {
			if strings.HasPrefix(m, "```") {
				inner = !inner
			}
			if h := headingLevel(m); !inner && h > 0 && h <= level {
				break
			}
			body = append(body, m)
		}
		return strings.TrimSpace(strings.Join(body, "\n")), true
	}
	return "", false
}

// headingLevel is the level of a Markdown heading line, 0 for other lines.
func headingLevel(line string) int {
	n := len(line) - len(strings.TrimLeft(line, "#"))
	if n == 0 || n > 6 || !strings.HasPrefix(line[n:], " ") {
		return 0
	}
	return n
}
