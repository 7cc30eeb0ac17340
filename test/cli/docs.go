package clisuite

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	testingclock "k8s.io/utils/clock/testing"
)

// ReferencePage is the page that documents kubectl initlock for operators,
// relative to the repository root.
var ReferencePage = filepath.Join("docs", "reference.md")

// Reference returns ReferencePage's path and text.
func Reference(t *testing.T) (string, string) {
	t.Helper()
	path := repoPath(t, ReferencePage)
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return path, string(b)
}

// WriteReference writes ReferencePage when the test runs with -update,
// else reports what differs.
func WriteReference(t *testing.T, path, old, updated, what string) {
	t.Helper()
	if updated == old {
		return
	}
	if *Update {
		if err := os.WriteFile(path, []byte(updated), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	t.Errorf("%s: %s differ from the plugin's (run go test ./internal/cli -run %s -update to rewrite them)", ReferencePage, what, t.Name())
}

// sampleBlock is a console block of referencePage that shows a kubectl
// initlock command and its output.
var sampleBlock = regexp.MustCompile("(?s)```console\n\\$ (kubectl initlock [^\n]*)\n(.*?)```")

// referenceFleet makes, in namespace capi, the clusters that the samples
// of referencePage show: a foreign ConfigMap, a healthy lock, a lock held
// after init, an orphan and a lock that lost its ownerReference in a
// restore.
func (b *Backend) referenceFleet(t *testing.T) {
	ns := b.namespace(t, "capi")
	b.newCluster(t, ns, "c-foreign", false)
	b.newConfigMap(t, ns, "c-foreign-lock", nil, map[string]string{"settings": "mine"}, nil)
	b.held(t, ns, "c-healthy", false)
	b.held(t, ns, "c-init", true)
	b.newLock(t, ns, "c-orphan", "m-orphan", nil)
	b.unowned(t, ns, "c-unowned")
}

// Every sample of kubectl initlock in referencePage is its real output on
// referenceFleet, two days after the locks were made: stderr first, then
// stdout, as a terminal shows them.
func referenceSamples(t *testing.T, b *Backend) {
	path, text := Reference(t)
	b.referenceFleet(t)
	inv := invocation{clock: testingclock.NewFakePassiveClock(time.Now().Add(2*24*time.Hour + 30*time.Second))}
	samples := 0
	updated := sampleBlock.ReplaceAllStringFunc(text, func(block string) string {
		m := sampleBlock.FindStringSubmatch(block)
		if strings.ContainsAny(m[1], `'"\|`) {
			t.Errorf("sample %q: only plain words are run", m[1])
			return block
		}
		samples++
		r := b.run(t, inv, strings.Fields(strings.TrimPrefix(m[1], "kubectl initlock "))...)
		return "```console\n$ " + m[1] + "\n" + r.Err + r.Out + "```"
	})
	if samples == 0 {
		t.Fatalf("%s shows no sample of kubectl initlock", ReferencePage)
	}
	WriteReference(t, path, text, updated, "samples of kubectl initlock")
}
