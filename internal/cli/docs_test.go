package cli_test

import (
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/initlock/initlock/internal/cli"
	clisuite "github.com/initlock/initlock/test/cli"
)

// The help of every command is the golden file's: a change of a command's
// help is seen in review, and -update writes it.
func TestHelpGolden(t *testing.T) {
	// kubectl's --cache-dir default names the home folder.
	t.Setenv("HOME", "/home/user")
	t.Setenv("KUBECACHEDIR", "")
	for _, args := range [][]string{{}, {"list"}, {"repair"}, {"release"}, {"relinks"}, {"version"}, {"doctor"}} {
		name := strings.Join(append([]string{"help"}, args...), "-") + ".golden"
		t.Run(name, func(t *testing.T) {
			clisuite.Golden(t, filepath.Join("help", name), clisuite.Execute(t, cli.Options{}, append(args, "--help")...).ExpectCode(t, cli.ExitOK).Out)
		})
	}
}

// commandRow is a row of the reference page's table of kubectl initlock
// commands.
var commandRow = regexp.MustCompile("(?m)^\\| `kubectl initlock ([a-z]+)[^`]*` \\|")

// The reference page's table of commands shows each command's usage as its
// help does.
func TestReferenceCommandTable(t *testing.T) {
	path, text := clisuite.Reference(t)
	root := cli.NewRootCommand(cli.Options{})
	seen := 0
	updated := commandRow.ReplaceAllStringFunc(text, func(row string) string {
		name := commandRow.FindStringSubmatch(row)[1]
		for _, c := range root.Commands() {
			if c.Name() == name {
				seen++
				return "| `kubectl initlock " + strings.ReplaceAll(c.Use, "|", `\|`) + "` |"
			}
		}
		t.Errorf("%s names command %q, which kubectl initlock does not have", clisuite.ReferencePage, name)
		return row
	})
	want := 0
	for _, c := range root.Commands() {
		if c.Name() != "help" && c.Name() != "completion" {
			want++
		}
	}
	if seen != want {
		t.Errorf("%s's table has %d commands, want %d", clisuite.ReferencePage, seen, want)
	}
	clisuite.WriteReference(t, path, text, updated, "usages in the table of commands")
}
