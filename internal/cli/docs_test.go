package cli_test

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	testingclock "k8s.io/utils/clock/testing"

	"github.com/initlock/initlock/internal/cli"
	"github.com/initlock/initlock/internal/kubeenv"
)

// The help of every command is the golden file's: a change of a command's
// help is seen in review, and -update writes it.
func TestHelpGolden(t *testing.T) {
	// kubectl's --cache-dir default names the home folder.
	t.Setenv("HOME", "/home/user")
	t.Setenv("KUBECACHEDIR", "")
	for _, args := range [][]string{{}, {"list"}, {"repair"}, {"release"}, {"version"}} {
		name := strings.Join(append([]string{"help"}, args...), "-") + ".golden"
		t.Run(name, func(t *testing.T) {
			r := invocation{noKubeconfig: true}.run(t, append(args, "--help")...)
			r.expectCode(t, cli.ExitOK)
			golden(t, filepath.Join("help", name), r.out)
		})
	}
}

// referencePage is the page that documents kubectl initlock for operators,
// relative to the repository root.
var referencePage = filepath.Join("docs", "reference.md")

// reference returns referencePage's text and its path.
func reference(t *testing.T) (string, string) {
	t.Helper()
	root, err := kubeenv.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(root, referencePage)
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return path, string(b)
}

// writeReference writes referencePage when the test runs with -update, else
// reports what differs.
func writeReference(t *testing.T, path, old, updated, what string) {
	t.Helper()
	if updated == old {
		return
	}
	if *update {
		if err := os.WriteFile(path, []byte(updated), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	t.Errorf("%s: %s differ from the plugin's (run go test ./internal/cli -run %s -update to rewrite them)", referencePage, what, t.Name())
}

// commandRow is a row of referencePage's table of kubectl initlock commands.
var commandRow = regexp.MustCompile("(?m)^\\| `kubectl initlock ([a-z]+)[^`]*` \\|")

// referencePage's table of commands shows each command's usage as its help
// does.
func TestReferenceCommandTable(t *testing.T) {
	path, text := reference(t)
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
		t.Errorf("%s names command %q, which kubectl initlock does not have", referencePage, name)
		return row
	})
	want := 0
	for _, c := range root.Commands() {
		if c.Name() != "help" && c.Name() != "completion" {
			want++
		}
	}
	if seen != want {
		t.Errorf("%s's table has %d commands, want %d", referencePage, seen, want)
	}
	writeReference(t, path, text, updated, "usages in the table of commands")
}

// sampleBlock is a console block of referencePage that shows a kubectl
// initlock command and its output.
var sampleBlock = regexp.MustCompile("(?s)```console\n\\$ (kubectl initlock [^\n]*)\n(.*?)```")

// referenceFleet makes, in namespace capi, the clusters that the samples
// of referencePage show: a foreign ConfigMap, a healthy lock, a lock held
// after init, an orphan and a lock that lost its ownerReference in a
// restore.
func referenceFleet(t *testing.T) {
	ns := fixedNamespace(t, "capi")
	newCluster(t, ns, "c-foreign", false)
	newConfigMap(t, ns, "c-foreign-lock", nil, map[string]string{"settings": "mine"}, nil)
	healthy := newCluster(t, ns, "c-healthy", false)
	newMachine(t, ns, "c-healthy", "m-healthy", nil)
	newLock(t, ns, "c-healthy", "m-healthy", healthy)
	initialised := newCluster(t, ns, "c-init", true)
	newMachine(t, ns, "c-init", "m-init", nil)
	newLock(t, ns, "c-init", "m-init", initialised)
	newLock(t, ns, "c-orphan", "m-orphan", nil)
	newCluster(t, ns, "c-unowned", false)
	newMachine(t, ns, "c-unowned", "m-unowned", nil)
	newLock(t, ns, "c-unowned", "m-unowned", nil)
}

// Every sample of kubectl initlock in referencePage is its real output on
// referenceFleet, two days after the locks were made: stderr first, then
// stdout, as a terminal shows them.
func TestReferenceSamples(t *testing.T) {
	path, text := reference(t)
	referenceFleet(t)
	inv := invocation{clock: testingclock.NewFakePassiveClock(time.Now().Add(2*24*time.Hour + 30*time.Second))}
	samples := 0
	updated := sampleBlock.ReplaceAllStringFunc(text, func(block string) string {
		m := sampleBlock.FindStringSubmatch(block)
		if strings.ContainsAny(m[1], `'"\|`) {
			t.Errorf("sample %q: only plain words are run", m[1])
			return block
		}
		samples++
		r := inv.run(t, strings.Fields(strings.TrimPrefix(m[1], "kubectl initlock "))...)
		return "```console\n$ " + m[1] + "\n" + r.err + r.out + "```"
	})
	if samples == 0 {
		t.Fatalf("%s shows no sample of kubectl initlock", referencePage)
	}
	writeReference(t, path, text, updated, "samples of kubectl initlock")
}
