package cli_test

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
	"github.com/initlock/initlock/pkg/initlock/engine"
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
func fleet(t *testing.T, ns string) {
	t.Helper()
	corrupt := newCluster(t, ns, "c-corrupt", false)
	newConfigMap(t, ns, "c-corrupt-lock", map[string]string{engine.ClusterNameLabel: "c-corrupt"},
		map[string]string{engine.DataKey: "not json"}, corrupt)

	newCluster(t, ns, "c-foreign", false)
	newConfigMap(t, ns, "c-foreign-lock", nil, map[string]string{"settings": "mine"}, nil)

	newCluster(t, ns, "c-free", false)

	healthy := newCluster(t, ns, "c-healthy", false)
	newMachine(t, ns, "c-healthy", "m-healthy", nil)
	newLock(t, ns, "c-healthy", "m-healthy", healthy)

	held := newCluster(t, ns, "c-held", false)
	newMachine(t, ns, "c-held", "m-held", nil)
	heldLock := kubeenv.NewLock(ns, "c-held", "m-held", held)
	heldLock.Finalizers = []string{"example.com/keep"}
	if err := env.Client.Create(t.Context(), heldLock); err != nil {
		t.Fatal(err)
	}
	// A delete of a lock passes the lock guard only once it is marked.
	marked := heldLock.DeepCopy()
	marked.Annotations = map[string]string{engine.ReleaseAnnotation: string(heldLock.UID)}
	if err := env.Client.Patch(t.Context(), marked, client.MergeFrom(heldLock)); err != nil {
		t.Fatal(err)
	}
	if err := env.Client.Delete(t.Context(), marked); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = env.Client.Patch(context.WithoutCancel(t.Context()), heldLock, client.RawPatch(types.JSONPatchType, []byte(`[{"op":"remove","path":"/metadata/finalizers"}]`)))
	})

	initialised := newCluster(t, ns, "c-init", true)
	newMachine(t, ns, "c-init", "m-init", nil)
	newLock(t, ns, "c-init", "m-init", initialised)

	newCluster(t, ns, "c-lost", false, func(u *unstructured.Unstructured) {
		u.SetAnnotations(map[string]string{engine.GrantAnnotation: `{"machineName":"m-lost","acquiredAt":"2026-01-01T00:00:00Z"}`})
	})
	newMachine(t, ns, "c-lost", "m-lost", nil)

	newLock(t, ns, "c-orphan", "m-orphan", nil)

	newCluster(t, ns, "c-paused", false, paused)
	newMachine(t, ns, "c-paused", "m-paused", nil)
	newLock(t, ns, "c-paused", "m-paused", nil)

	stale := newCluster(t, ns, "c-stale", false)
	newLock(t, ns, "c-stale", "m-gone", stale)

	newCluster(t, ns, "c-unowned", false)
	newMachine(t, ns, "c-unowned", "m-unowned", nil)
	newLock(t, ns, "c-unowned", "m-unowned", nil)

	newCluster(t, ns, "c-wrong", false)
	newMachine(t, ns, "c-wrong", "m-wrong", nil)
	newLock(t, ns, "c-wrong", "m-wrong", healthy)
}

// farFuture is a clock 400.5 days after now, so that every age prints as
// "400d" whatever the second the objects were created in.
func farFuture() *testingclock.FakePassiveClock {
	return testingclock.NewFakePassiveClock(time.Now().Add(400*24*time.Hour + 12*time.Hour))
}

func TestListGolden(t *testing.T) {
	ns := fixedNamespace(t, "golden")
	fleet(t, ns)
	inv := invocation{clock: farFuture()}

	for _, tc := range []struct {
		name string
		args []string
	}{
		{"list-table.golden", []string{"list", "-n", ns}},
		{"list-show-free.golden", []string{"list", "-n", ns, "--show-free"}},
		{"list-wide.golden", []string{"list", "-n", ns, "-o", "wide"}},
		{"list-json.golden", []string{"list", "-n", ns, "-o", "json"}},
		{"list-yaml.golden", []string{"list", "-n", ns, "-o", "yaml"}},
		{"repair-dry-run.golden", []string{"repair", "-n", ns, "--dry-run=client"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := inv.run(t, tc.args...)
			want := 0
			if tc.args[0] == "repair" {
				want = 2 // corrupt and foreign
			}
			r.expectCode(t, want)
			golden(t, tc.name, mask(r.out))
		})
	}
}

var ansi = regexp.MustCompile("\x1b\\[[0-9;]*m")

// On a terminal the verdicts are coloured, and the columns stay aligned:
// without the escape sequences the output is the plain one.
func TestListColourOnlyOnTerminal(t *testing.T) {
	// Whatever the environment running the tests says.
	t.Setenv("TERM", "xterm")
	t.Setenv("NO_COLOR", "")
	if err := os.Unsetenv("NO_COLOR"); err != nil {
		t.Fatal(err)
	}
	ns := env.Namespace(t)
	fleet(t, ns)
	clk := farFuture()
	plain := invocation{clock: clk}.run(t, "list", "-n", ns)
	plain.expectCode(t, 0)
	if ansi.MatchString(plain.out) {
		t.Fatalf("colour in output that is not a terminal:\n%q", plain.out)
	}
	coloured := invocation{clock: clk, terminal: true}.run(t, "list", "-n", ns)
	coloured.expectCode(t, 0)
	if !strings.Contains(coloured.out, "\x1b[32mhealthy\x1b[0m") || !strings.Contains(coloured.out, "\x1b[31mcorrupt\x1b[0m") {
		t.Fatalf("no colour on a terminal:\n%q", coloured.out)
	}
	if got := ansi.ReplaceAllString(coloured.out, ""); got != plain.out {
		t.Fatalf("coloured output is not the plain output with colours:\n%s\nvs\n%s", got, plain.out)
	}
	t.Setenv("NO_COLOR", "1")
	noColour := invocation{clock: clk, terminal: true}.run(t, "list", "-n", ns)
	if noColour.out != plain.out {
		t.Fatalf("NO_COLOR is not honoured:\n%q", noColour.out)
	}
}

// list makes the same number of requests whatever the number of locks:
// four lists (Clusters, labelled ConfigMaps, ConfigMap metadata, Machines)
// and a GET for each ConfigMap that takes a Cluster's lock name; no write.
func TestListRequestsDoNotGrowWithTheFleet(t *testing.T) {
	ns := env.Namespace(t)
	fleet(t, ns)
	var c kubeenv.Counter
	r := invocation{wrap: counting(&c)}.run(t, "list", "-n", ns)
	r.expectCode(t, 0)
	if got := c.Count("list"); got != 4 {
		t.Errorf("lists = %d, want 4", got)
	}
	if got := c.Writes(); got != 0 {
		t.Errorf("writes = %d, want 0", got)
	}
	// One GET for c-foreign-lock, the others for discovery.
	gets := c.Count("get")

	for i := range 10 {
		name := "c-more-" + string(rune('a'+i))
		cl := newCluster(t, ns, name, false)
		newMachine(t, ns, name, "m-"+name, nil)
		newLock(t, ns, name, "m-"+name, cl)
	}
	c.Reset()
	r = invocation{wrap: counting(&c)}.run(t, "list", "-n", ns)
	r.expectCode(t, 0)
	if got := c.Count("list"); got != 4 {
		t.Errorf("lists with 10 more clusters = %d, want 4", got)
	}
	if got := c.Count("get"); got != gets {
		t.Errorf("gets with 10 more clusters = %d, want %d as before", got, gets)
	}
}

// Without a Cluster lacking its labelled lock, the ConfigMap metadata list
// is skipped.
func TestListSkipsForeignSearchWhenEveryClusterHasItsLock(t *testing.T) {
	ns := env.Namespace(t)
	cl := newCluster(t, ns, "c1", false)
	newMachine(t, ns, "c1", "m1", nil)
	newLock(t, ns, "c1", "m1", cl)
	var c kubeenv.Counter
	r := invocation{wrap: counting(&c)}.run(t, "list", "-n", ns)
	r.expectCode(t, 0)
	if got := c.Count("list"); got != 3 {
		t.Errorf("lists = %d, want 3", got)
	}
}

func TestListAllNamespacesAndEmpty(t *testing.T) {
	ns1, ns2, empty := env.Namespace(t), env.Namespace(t), env.Namespace(t)
	for _, ns := range []string{ns1, ns2} {
		cl := newCluster(t, ns, "c1", false)
		newMachine(t, ns, "c1", "m1", nil)
		newLock(t, ns, "c1", "m1", cl)
	}
	r := run(t, "list", "-A", "-o", "json")
	r.expectCode(t, 0)
	for _, ns := range []string{ns1, ns2} {
		if !strings.Contains(r.out, `"namespace": "`+ns+`"`) {
			t.Errorf("list -A misses namespace %s:\n%s", ns, r.out)
		}
	}
	r = run(t, "list", "-n", empty)
	r.expectCode(t, 0)
	if r.out != "" || !strings.Contains(r.err, "No init locks found") {
		t.Errorf("empty namespace: stdout %q, stderr %q", r.out, r.err)
	}
	r = run(t, "list", "-n", empty, "-o", "json")
	r.expectCode(t, 0)
	if !strings.Contains(r.out, `"items": []`) {
		t.Errorf("empty JSON list has no empty items:\n%s", r.out)
	}
	r = run(t, "list", "-n", empty, "-o", "xml")
	r.expectCode(t, 1)
	if !strings.Contains(r.err, `unknown output format "xml"`) {
		t.Errorf("bad -o: %s", r.err)
	}
}
