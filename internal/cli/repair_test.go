package cli_test

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/rest"
	testingclock "k8s.io/utils/clock/testing"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/initlock/initlock/internal/cli"
	"github.com/initlock/initlock/internal/kubeenv"
	"github.com/initlock/initlock/internal/kubeenv/velerosim"
	"github.com/initlock/initlock/pkg/initlock"
	"github.com/initlock/initlock/pkg/initlock/capi"
	"github.com/initlock/initlock/pkg/initlock/engine"
)

func backup(t *testing.T, obj client.Object, gvkObj *unstructured.Unstructured) *unstructured.Unstructured {
	t.Helper()
	u := gvkObj.DeepCopy()
	if err := env.Client.Get(t.Context(), client.ObjectKeyFromObject(obj), u); err != nil {
		t.Fatalf("backing up %s: %v", obj.GetName(), err)
	}
	return u
}

// After a Velero-style restore the lock has lost its ownerReference and
// the Cluster has a new UID; repair re-adopts the lock and list shows
// everything healthy.
func TestRepairAfterVeleroRestore(t *testing.T) {
	ctx := t.Context()
	ns := env.Namespace(t)
	cluster := newCluster(t, ns, "c1", false)
	machine := newMachine(t, ns, "c1", "m1", nil)
	res, err := initlock.New(env.Client).Lock(ctx, cluster, machine)
	if err != nil || !res.Acquired {
		t.Fatalf("Lock: %+v, %v", res, err)
	}
	if got := byCluster(listJSON(t, ns))["c1"]; got.Verdict != "healthy" {
		t.Fatalf("before backup: %+v", got)
	}

	cmKind := &unstructured.Unstructured{}
	cmKind.SetGroupVersionKind(corev1.SchemeGroupVersion.WithKind("ConfigMap"))
	lockObj := &corev1.ConfigMap{}
	lockObj.Namespace, lockObj.Name = ns, "c1-lock"
	savedLock := backup(t, lockObj, cmKind)
	savedMachine := backup(t, machine, machine)
	savedCluster := backup(t, cluster, cluster)
	oldUID := cluster.GetUID()

	// Disaster: the cluster goes, with its lock (past the lock guard), so
	// do the machines.
	if err := kubeenv.ReleaseLock(ctx, env.Client, lockObj); err != nil {
		t.Fatal(err)
	}
	if err := env.Client.Delete(ctx, cluster); err != nil {
		t.Fatal(err)
	}
	if err := env.Client.Delete(ctx, machine); err != nil {
		t.Fatal(err)
	}
	kubeenv.WaitGone(t, env.Client, lockObj, machine, cluster)

	// Restore in Velero's order: ConfigMaps, then Machines, then Clusters.
	out := velerosim.Restore(t, env.Config, velerosim.Options{}, savedCluster, savedMachine, savedLock)
	restored := out[len(out)-1]
	if restored.GetKind() != capi.ClusterKind {
		t.Fatalf("restored %s last, want the Cluster", restored.GetKind())
	}
	if restored.GetUID() == oldUID {
		t.Fatal("restored cluster kept its UID")
	}

	got := byCluster(listJSON(t, ns))["c1"]
	if got.Verdict != "unowned" || got.Owner != "missing" || !got.HolderExists || got.Holder != "m1" || got.Action != "adopt" {
		t.Fatalf("after restore: %+v", got)
	}

	var c kubeenv.Counter
	r := invocation{wrap: counting(&c)}.run(t, "repair", "-n", ns, "--yes")
	r.expectCode(t, cli.ExitOK)
	if !strings.Contains(r.out, "adopted") || !strings.Contains(r.out, "no ownerReference to its Cluster") {
		t.Errorf("repair output:\n%s", r.out)
	}
	if got := c.Writes(); got != 1 {
		t.Errorf("writes = %d, want 1 (one patch of the lock)", got)
	}

	for _, s := range listJSON(t, ns, "--show-free").Items {
		if s.Verdict != "healthy" || s.Owner != "ok" {
			t.Errorf("after repair: %+v", s)
		}
	}
	cm := kubeenv.MustGetLock(t, env.Client, ns, "c1")
	if len(cm.OwnerReferences) != 1 || cm.OwnerReferences[0].UID != restored.GetUID() {
		t.Fatalf("lock owner references after repair: %+v", cm.OwnerReferences)
	}
	// A second repair has nothing to do.
	c.Reset()
	r = invocation{wrap: counting(&c)}.run(t, "repair", "-n", ns, "--yes")
	r.expectCode(t, cli.ExitOK)
	if c.Writes() != 0 || !strings.Contains(r.out, "Nothing to change.") {
		t.Errorf("second repair made %d writes:\n%s", c.Writes(), r.out)
	}
}

func TestRepairDryRunChangesNothing(t *testing.T) {
	ns := env.Namespace(t)
	fleet(t, ns)
	before := resourceVersions(t, ns)
	for _, flag := range []string{"--dry-run", "--dry-run=client"} {
		var c kubeenv.Counter
		r := invocation{clock: pastGrace(), wrap: counting(&c)}.run(t, "repair", "-n", ns, flag, "--yes")
		r.expectCode(t, cli.ExitNeedsHuman)
		if !strings.Contains(r.out, "Dry run: nothing was changed.") || !strings.Contains(r.out, "Planned changes (5)") {
			t.Errorf("%s output:\n%s", flag, r.out)
		}
		if got := c.Writes(); got != 0 {
			t.Errorf("%s made %d writes", flag, got)
		}
	}
	after := resourceVersions(t, ns)
	if fmt.Sprint(before) != fmt.Sprint(after) {
		t.Errorf("resourceVersions changed:\nbefore %v\nafter  %v", before, after)
	}
	r := run(t, "repair", "-n", ns, "--dry-run=server")
	r.expectCode(t, cli.ExitError)
	if !strings.Contains(r.err, "--dry-run=server is not supported") {
		t.Errorf("stderr: %s", r.err)
	}
}

// repair applies every planned change with one write each, leaves what
// needs a person, and exits 2 for it.
func TestRepairFleet(t *testing.T) {
	ns := env.Namespace(t)
	fleet(t, ns)
	var c kubeenv.Counter
	r := invocation{clock: pastGrace(), wrap: counting(&c)}.run(t, "repair", "-n", ns, "--yes")
	r.expectCode(t, cli.ExitNeedsHuman)
	if got := c.Writes(); got != 7 {
		t.Errorf("writes = %d, want 7 (2 adopt, 2 releases of a release mark and a delete each, 1 orphan's mark)", got)
	}
	for _, want := range []string{
		"Done: 2 adopted, 2 released, 1 marked; 0 failed.",
		"2 locks need a person",
		"Marked orphan locks are collected by a repair run 10m0s or more from now",
	} {
		if !strings.Contains(r.out, want) {
			t.Errorf("output lacks %q:\n%s", want, r.out)
		}
	}
	got := byCluster(listJSON(t, ns))
	want := map[string]string{
		"c-corrupt": "corrupt", "c-foreign": "foreign", "c-healthy": "healthy", "c-lost": "lost",
		"c-orphan": "orphan", "c-paused": "unowned", "c-unowned": "healthy", "c-wrong": "healthy",
	}
	for cluster, verdict := range want {
		if got[cluster].Verdict != verdict {
			t.Errorf("%s: verdict %q, want %q", cluster, got[cluster].Verdict, verdict)
		}
	}
	for _, released := range []string{"c-init", "c-stale"} {
		if _, ok := got[released]; ok {
			t.Errorf("%s's lock was not released: %+v", released, got[released])
		}
	}
	if got["c-orphan"].ClusterAbsentSince == "" {
		t.Errorf("orphan not marked: %+v", got["c-orphan"])
	}
	// Run again at once: the orphan waits for its grace period, the rest is
	// done or needs a person.
	c.Reset()
	r = invocation{wrap: counting(&c)}.run(t, "repair", "-n", ns, "--yes")
	r.expectCode(t, cli.ExitNeedsHuman)
	if c.Writes() != 0 {
		t.Errorf("second repair made %d writes:\n%s", c.Writes(), r.out)
	}
}

// An orphan lock is marked by a first repair and collected by one run after
// the grace period, not before.
func TestRepairCollectsOrphanAfterGrace(t *testing.T) {
	ns := env.Namespace(t)
	newLock(t, ns, "c1", "m-gone", nil)
	clk := testingclock.NewFakePassiveClock(time.Now())
	inv := invocation{clock: clk}

	r := inv.run(t, "repair", "-n", ns, "--orphan-grace=10m", "--yes")
	r.expectCode(t, cli.ExitOK)
	if !strings.Contains(r.out, "mark-orphan") || !strings.Contains(r.out, "marked") {
		t.Fatalf("first repair:\n%s", r.out)
	}
	if kubeenv.MustGetLock(t, env.Client, ns, "c1").Annotations[engine.ClusterAbsentAnnotation] == "" {
		t.Fatal("lock not marked")
	}

	clk.SetTime(clk.Now().Add(5 * time.Minute))
	r = inv.run(t, "repair", "-n", ns, "--orphan-grace=10m", "--yes")
	r.expectCode(t, cli.ExitOK)
	if !strings.Contains(r.out, "Left as they are for now (1)") || kubeenv.MustGetLock(t, env.Client, ns, "c1") == nil {
		t.Fatalf("repair within the grace period:\n%s", r.out)
	}

	clk.SetTime(clk.Now().Add(6 * time.Minute))
	r = inv.run(t, "repair", "-n", ns, "--orphan-grace=10m", "--yes")
	r.expectCode(t, cli.ExitOK)
	if !strings.Contains(r.out, "collected") || kubeenv.MustGetLock(t, env.Client, ns, "c1") != nil {
		t.Fatalf("repair after the grace period:\n%s", r.out)
	}
}

// repair never deletes a lock whose holder exists while the control plane is
// not initialised, whatever the policy and the lock's state.
func TestRepairNeverDeletesLockOfRunningInit(t *testing.T) {
	for _, tc := range []struct {
		name string
		// setup makes cluster c1 (unless orphan), machine m1 and lock c1-lock
		// held by m1.
		setup func(t *testing.T, ns string)
		args  []string
	}{
		{"owned", func(t *testing.T, ns string) {
			cl := newCluster(t, ns, "c1", false)
			newLock(t, ns, "c1", "m1", cl)
		}, nil},
		{"unowned after restore", func(t *testing.T, ns string) {
			newCluster(t, ns, "c1", false)
			newLock(t, ns, "c1", "m1", nil)
		}, nil},
		{"owned by another cluster", func(t *testing.T, ns string) {
			other := newCluster(t, ns, "c2", false)
			newCluster(t, ns, "c1", false)
			newLock(t, ns, "c1", "m1", other)
		}, nil},
		{"stale cluster-absent mark", func(t *testing.T, ns string) {
			cl := newCluster(t, ns, "c1", false)
			cm := newLock(t, ns, "c1", "m1", cl)
			cm.Annotations = map[string]string{engine.ClusterAbsentAnnotation: "2020-01-01T00:00:00Z some-old-uid"}
			if err := env.Client.Update(t.Context(), cm); err != nil {
				t.Fatal(err)
			}
		}, []string{"--orphan-grace=0s"}},
		{"no release policy", func(t *testing.T, ns string) {
			newCluster(t, ns, "c1", false)
			newLock(t, ns, "c1", "m1", nil)
		}, []string{"--release-after-init=false", "--orphan-grace=0s"}},
		{"cluster missing, mark expired", func(t *testing.T, ns string) {
			newLock(t, ns, "c1", "m1", nil)
		}, []string{"--orphan-grace=0s"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ns := env.Namespace(t)
			newMachine(t, ns, "c1", "m1", nil)
			tc.setup(t, ns)
			clk := testingclock.NewFakePassiveClock(time.Now())
			// Three rounds, each a grace period apart, so that every
			// two-step action would have had its chance.
			for range 3 {
				r := invocation{clock: clk}.run(t, append([]string{"repair", "-n", ns, "--yes"}, tc.args...)...)
				r.expectCode(t, cli.ExitOK)
				cm := kubeenv.MustGetLock(t, env.Client, ns, "c1")
				if cm == nil {
					t.Fatalf("the lock of a running init was deleted:\n%s", r.out)
				}
				if rec, err := engine.DecodeRecord(cm.Data[engine.DataKey]); err != nil || rec.MachineName != "m1" {
					t.Fatalf("lock record changed: %q (%v)", cm.Data[engine.DataKey], err)
				}
				clk.SetTime(clk.Now().Add(time.Hour))
			}
		})
	}
}

// interfere returns a config wrapper that, before each of the first n
// writes (method) to the lock of cluster goes out, changes the lock with the
// admin client, so that the write meets a conflict.
func interfere(t *testing.T, c *kubeenv.Counter, method, ns, cluster string, n int, change func(ctx context.Context, cm *corev1.ConfigMap) error) func(*rest.Config) *rest.Config {
	var left atomic.Int32
	left.Store(int32(n))
	var mu sync.Mutex
	return func(cfg *rest.Config) *rest.Config {
		cfg = c.CountingConfig(cfg)
		cfg.Wrap(func(rt http.RoundTripper) http.RoundTripper {
			return kubeenv.RoundTripperFunc(func(req *http.Request) (*http.Response, error) {
				if req.Method == method && strings.HasSuffix(req.URL.Path, "/namespaces/"+ns+"/configmaps/"+cluster+engine.LockSuffix) && left.Add(-1) >= 0 {
					mu.Lock()
					cm := kubeenv.MustGetLock(t, env.Client, ns, cluster)
					if err := change(req.Context(), cm); err != nil {
						t.Errorf("interfering: %v", err)
					}
					mu.Unlock()
				}
				return rt.RoundTrip(req)
			})
		})
		return cfg
	}
}

func touch(ctx context.Context, cm *corev1.ConfigMap) error {
	if cm.Annotations == nil {
		cm.Annotations = map[string]string{}
	}
	cm.Annotations["example.test/touched"] = time.Now().Format(time.RFC3339Nano)
	return env.Client.Update(ctx, cm)
}

// A lock that changes while repair writes it is observed and decided again.
func TestRepairRetriesAfterConflict(t *testing.T) {
	t.Run("changed", func(t *testing.T) {
		ns := env.Namespace(t)
		newCluster(t, ns, "c1", false)
		newMachine(t, ns, "c1", "m1", nil)
		newLock(t, ns, "c1", "m1", nil)
		var c kubeenv.Counter
		r := invocation{wrap: interfere(t, &c, http.MethodPatch, ns, "c1", 1, touch)}.run(t, "repair", "-n", ns, "--yes")
		r.expectCode(t, cli.ExitOK)
		if got := c.Count("patch"); got != 2 {
			t.Errorf("patches = %d, want 2 (a conflict, then the adoption)", got)
		}
		if got := byCluster(listJSON(t, ns))["c1"]; got.Verdict != "healthy" {
			t.Errorf("after repair: %+v", got)
		}
	})
	t.Run("deleted", func(t *testing.T) {
		ns := env.Namespace(t)
		cl := newCluster(t, ns, "c1", true)
		newLock(t, ns, "c1", "m1", cl)
		var c kubeenv.Counter
		del := func(ctx context.Context, cm *corev1.ConfigMap) error { return env.Client.Delete(ctx, cm) }
		r := invocation{wrap: interfere(t, &c, http.MethodDelete, ns, "c1", 1, del)}.run(t, "repair", "-n", ns, "--yes")
		r.expectCode(t, cli.ExitOK)
		if !strings.Contains(r.out, "now free, nothing to do") {
			t.Errorf("output:\n%s", r.out)
		}
	})
	t.Run("keeps changing", func(t *testing.T) {
		ns := env.Namespace(t)
		newCluster(t, ns, "c1", false)
		newMachine(t, ns, "c1", "m1", nil)
		newLock(t, ns, "c1", "m1", nil)
		var c kubeenv.Counter
		r := invocation{wrap: interfere(t, &c, http.MethodPatch, ns, "c1", 100, touch)}.run(t, "repair", "-n", ns, "--yes")
		r.expectCode(t, cli.ExitError)
		if got := c.Count("patch"); got != 5 {
			t.Errorf("patches = %d, want 5 (bounded)", got)
		}
		if !strings.Contains(r.err, `configmap "c1-lock": adopt: the lock changed 5 times in a row`) {
			t.Errorf("stderr: %s", r.err)
		}
	})
}

func TestRepairConfirmationAndProgressOnTerminal(t *testing.T) {
	setup := func(t *testing.T) string {
		ns := env.Namespace(t)
		newCluster(t, ns, "c1", false)
		newMachine(t, ns, "c1", "m1", nil)
		newLock(t, ns, "c1", "m1", nil)
		return ns
	}
	t.Run("declined", func(t *testing.T) {
		ns := setup(t)
		var c kubeenv.Counter
		r := invocation{terminal: true, stdin: "n\n", wrap: counting(&c)}.run(t, "repair", "-n", ns)
		r.expectCode(t, cli.ExitError)
		if !strings.Contains(r.err, "Apply 1 change? [y/N]: ") || !strings.Contains(r.err, "repair aborted; nothing was changed") {
			t.Errorf("stdout:\n%s\nstderr:\n%s", r.out, r.err)
		}
		if c.Writes() != 0 {
			t.Errorf("declined repair made %d writes", c.Writes())
		}
	})
	t.Run("accepted with progress bar", func(t *testing.T) {
		ns := setup(t)
		r := invocation{terminal: true, stdin: "yes\n", progressThreshold: 1}.run(t, "repair", "-n", ns)
		r.expectCode(t, cli.ExitOK)
		if !strings.Contains(r.err, "\rrepairing [..............................] 0/1") || !strings.Contains(r.err, "\rrepairing [##############################] 1/1") {
			t.Errorf("no progress bar on stderr: %q", r.err)
		}
	})
	t.Run("--yes does not ask", func(t *testing.T) {
		ns := setup(t)
		r := invocation{terminal: true}.run(t, "repair", "-n", ns, "--yes")
		r.expectCode(t, cli.ExitOK)
		if strings.Contains(r.out+r.err, "[y/N]") {
			t.Errorf("asked despite --yes:\n%s%s", r.out, r.err)
		}
	})
}

func TestRepairExitCodes(t *testing.T) {
	t.Run("healthy", func(t *testing.T) {
		ns := env.Namespace(t)
		cl := newCluster(t, ns, "c1", false)
		newMachine(t, ns, "c1", "m1", nil)
		newLock(t, ns, "c1", "m1", cl)
		run(t, "repair", "-n", ns, "--yes").expectCode(t, cli.ExitOK)
	})
	t.Run("corrupt", func(t *testing.T) {
		ns := env.Namespace(t)
		cl := newCluster(t, ns, "c1", false)
		newConfigMap(t, ns, "c1-lock", map[string]string{engine.ClusterNameLabel: "c1"}, map[string]string{engine.DataKey: `{"machineName":""}`}, cl)
		r := run(t, "repair", "-n", ns, "--yes")
		r.expectCode(t, cli.ExitNeedsHuman)
		if !strings.Contains(r.out, "kubectl initlock release c1 -n "+ns+" --force") {
			t.Errorf("no way out named:\n%s", r.out)
		}
	})
	t.Run("foreign", func(t *testing.T) {
		ns := env.Namespace(t)
		newCluster(t, ns, "c1", false)
		newConfigMap(t, ns, "c1-lock", nil, nil, nil)
		r := run(t, "repair", "-n", ns, "--yes")
		r.expectCode(t, cli.ExitNeedsHuman)
		if !strings.Contains(r.out, `configmap "c1-lock" is not an init lock (no cluster.x-k8s.io/cluster-name label); refusing to touch it`) {
			t.Errorf("output:\n%s", r.out)
		}
	})
	t.Run("error", func(t *testing.T) {
		r := invocation{kubeconfig: "/nonexistent/kubeconfig"}.run(t, "repair", "-n", "default")
		r.expectCode(t, cli.ExitError)
	})
}

// The v1beta2 Clusters of this control plane are read in the version
// discovery prefers.
func TestDiscoveredVersion(t *testing.T) {
	v, err := capi.Discover(env.Discovery(t))
	if err != nil || v != capi.V1Beta2 {
		t.Fatalf("Discover = %q, %v", v, err)
	}
}
