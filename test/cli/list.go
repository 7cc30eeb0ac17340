package clisuite

import (
	"context"
	"os"
	"regexp"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	testingclock "k8s.io/utils/clock/testing"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/initlock/initlock/internal/kubeenv"
	"github.com/initlock/initlock/internal/kubeenv/wire"
)

// fleet makes, in namespace ns, one cluster for every verdict:
//
//	c-corrupt      lock-information is not JSON
//	c-foreign      c-foreign-lock has no cluster-name label
//	c-free         no lock
//	c-healthy      held by an existing machine, owned
//	c-held         held by an existing machine, marked for release and being
//	               deleted, held back by another controller's finalizer
//	c-init         control plane initialised, still held
//	c-lost         no lock, but m-lost carries the grant
//	c-orphan       lock without Cluster (and without holder)
//	c-paused       paused, lock not owned
//	c-stale        holder m-gone does not exist
//	c-unowned      lock without ownerReference (as after a restore)
//	c-wrong        lock owned by c-healthy
func (b *Backend) fleet(t *testing.T, ns string) {
	t.Helper()
	corrupt := b.newCluster(t, ns, "c-corrupt", false)
	b.newConfigMap(t, ns, "c-corrupt-lock", map[string]string{wire.ClusterNameLabel: "c-corrupt"},
		map[string]string{wire.DataKey: "not json"}, corrupt)

	b.newCluster(t, ns, "c-foreign", false)
	b.newConfigMap(t, ns, "c-foreign-lock", nil, map[string]string{"settings": "mine"}, nil)

	b.newCluster(t, ns, "c-free", false)

	healthy := b.held(t, ns, "c-healthy", false)

	held := b.newCluster(t, ns, "c-held", false)
	b.newMachine(t, ns, "c-held", "m-held", nil)
	heldLock := kubeenv.NewLock(ns, "c-held", "m-held", held)
	heldLock.Finalizers = []string{"example.com/keep"}
	if err := b.Client.Create(t.Context(), heldLock); err != nil {
		t.Fatal(err)
	}
	// A delete of a lock passes the lock guard only once it is marked, and
	// names the resourceVersion the mark left.
	marked := heldLock.DeepCopy()
	marked.Annotations = map[string]string{wire.ReleaseAnnotation: string(heldLock.UID)}
	if err := b.Client.Patch(t.Context(), marked, client.MergeFrom(heldLock)); err != nil {
		t.Fatal(err)
	}
	if err := b.Client.Delete(t.Context(), marked, client.Preconditions{UID: &marked.UID, ResourceVersion: &marked.ResourceVersion}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = b.Client.Patch(context.WithoutCancel(t.Context()), heldLock, client.RawPatch(types.JSONPatchType, []byte(`[{"op":"remove","path":"/metadata/finalizers"}]`)))
	})

	b.held(t, ns, "c-init", true)

	b.newCluster(t, ns, "c-lost", false, func(u *unstructured.Unstructured) {
		u.SetAnnotations(map[string]string{wire.GrantAnnotation: `{"machineName":"m-lost","acquiredAt":"2026-01-01T00:00:00Z"}`})
	})
	b.newMachine(t, ns, "c-lost", "m-lost", nil)

	b.newLock(t, ns, "c-orphan", "m-orphan", nil)

	b.unowned(t, ns, "c-paused", kubeenv.Paused)

	stale := b.newCluster(t, ns, "c-stale", false)
	b.newLock(t, ns, "c-stale", "m-gone", stale)

	b.unowned(t, ns, "c-unowned")

	b.newCluster(t, ns, "c-wrong", false)
	b.newMachine(t, ns, "c-wrong", "m-wrong", nil)
	b.newLock(t, ns, "c-wrong", "m-wrong", healthy)
}

// farFuture is a clock 400.5 days after now, so that every age prints as
// "400d" whatever the second the objects were created in.
func farFuture() *testingclock.FakePassiveClock {
	return testingclock.NewFakePassiveClock(time.Now().Add(400*24*time.Hour + 12*time.Hour))
}

func listGolden(t *testing.T, b *Backend) {
	ns := b.namespace(t, "golden")
	b.fleet(t, ns)
	inv := invocation{clock: farFuture()}

	for _, tc := range []struct {
		name string
		code int
		args []string
	}{
		{"list-table.golden", 0, []string{"list", "-n", ns}},
		{"list-show-free.golden", 0, []string{"list", "-n", ns, "--show-free"}},
		{"list-wide.golden", 0, []string{"list", "-n", ns, "-o", "wide"}},
		{"list-json.golden", 0, []string{"list", "-n", ns, "-o", "json"}},
		{"list-yaml.golden", 0, []string{"list", "-n", ns, "-o", "yaml"}},
		{"repair-dry-run.golden", 2, []string{"repair", "-n", ns, "--dry-run=client"}}, // corrupt and foreign
	} {
		t.Run(tc.name, func(t *testing.T) {
			Golden(t, tc.name, mask(b.run(t, inv, tc.args...).ExpectCode(t, tc.code).Out))
		})
	}
}

var ansi = regexp.MustCompile("\x1b\\[[0-9;]*m")

// On a terminal the verdicts are coloured, and the columns stay aligned:
// without the escape sequences the output is the plain one.
func listColourOnlyOnTerminal(t *testing.T, b *Backend) {
	// Whatever the environment running the tests says.
	t.Setenv("TERM", "xterm")
	t.Setenv("NO_COLOR", "")
	if err := os.Unsetenv("NO_COLOR"); err != nil {
		t.Fatal(err)
	}
	ns := b.Namespace(t)
	b.fleet(t, ns)
	clk := farFuture()
	plain := b.run(t, invocation{clock: clk}, "list", "-n", ns).ExpectCode(t, 0)
	if ansi.MatchString(plain.Out) {
		t.Fatalf("colour in output that is not a terminal:\n%q", plain.Out)
	}
	coloured := b.run(t, invocation{clock: clk, terminal: true}, "list", "-n", ns).ExpectCode(t, 0)
	if !strings.Contains(coloured.Out, "\x1b[32mhealthy\x1b[0m") || !strings.Contains(coloured.Out, "\x1b[31mcorrupt\x1b[0m") {
		t.Fatalf("no colour on a terminal:\n%q", coloured.Out)
	}
	if got := ansi.ReplaceAllString(coloured.Out, ""); got != plain.Out {
		t.Fatalf("coloured output is not the plain output with colours:\n%s\nvs\n%s", got, plain.Out)
	}
	t.Setenv("NO_COLOR", "1")
	noColour := b.run(t, invocation{clock: clk, terminal: true}, "list", "-n", ns)
	if noColour.Out != plain.Out {
		t.Fatalf("NO_COLOR is not honoured:\n%q", noColour.Out)
	}
}

// list makes the same number of requests whatever the number of locks:
// four lists (Clusters, labelled ConfigMaps, ConfigMap metadata, Machines)
// and a GET for each ConfigMap that takes a Cluster's lock name; no write.
func listRequestsDoNotGrowWithTheFleet(t *testing.T, b *Backend) {
	ns := b.Namespace(t)
	b.fleet(t, ns)
	var c kubeenv.Counter
	b.run(t, invocation{counter: &c}, "list", "-n", ns).ExpectCode(t, 0)
	expectN(t, "lists", c.Count("list"), 4)
	expectN(t, "writes", c.Writes(), 0)
	// One GET for c-foreign-lock, the others for discovery.
	gets := c.Count("get")

	for i := range 10 {
		b.held(t, ns, "c-more-"+string(rune('a'+i)), false)
	}
	c.Reset()
	b.run(t, invocation{counter: &c}, "list", "-n", ns).ExpectCode(t, 0)
	expectN(t, "lists with 10 more clusters", c.Count("list"), 4)
	expectN(t, "gets with 10 more clusters, as before", c.Count("get"), gets)
}

// Without a Cluster lacking its labelled lock, the ConfigMap metadata list
// is skipped.
func listSkipsForeignSearchWhenEveryClusterHasItsLock(t *testing.T, b *Backend) {
	ns := b.Namespace(t)
	b.held(t, ns, "c1", false)
	var c kubeenv.Counter
	b.run(t, invocation{counter: &c}, "list", "-n", ns).ExpectCode(t, 0)
	expectN(t, "lists", c.Count("list"), 3)
}

func listAllNamespacesAndEmpty(t *testing.T, b *Backend) {
	ns1, ns2, empty := b.Namespace(t), b.Namespace(t), b.Namespace(t)
	for _, ns := range []string{ns1, ns2} {
		b.held(t, ns, "c1", false)
	}
	b.run(t, invocation{}, "list", "-A", "-o", "json").ExpectCode(t, 0).OutHas(t, `"namespace": "`+ns1+`"`, `"namespace": "`+ns2+`"`)
	r := b.run(t, invocation{}, "list", "-n", empty).ExpectCode(t, 0)
	if r.Out != "" || !strings.Contains(r.Err, "No init locks found") {
		t.Errorf("empty namespace: stdout %q, stderr %q", r.Out, r.Err)
	}
	b.run(t, invocation{}, "list", "-n", empty, "-o", "json").ExpectCode(t, 0).OutHas(t, `"items": []`)
	b.run(t, invocation{}, "list", "-n", empty, "-o", "xml").ExpectCode(t, 1).ErrHas(t, `unknown output format "xml"`)
}
