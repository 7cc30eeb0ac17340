package clisuite

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	testingclock "k8s.io/utils/clock/testing"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/initlock/initlock/internal/cli"
	"github.com/initlock/initlock/internal/kubeenv"
	"github.com/initlock/initlock/internal/kubeenv/wire"
)

// repair --dry-run plans the changes and makes none; repair applies every
// planned change with one write each, leaves what needs a person, and
// exits 2 for it.
func repairFleet(t *testing.T, b *Backend) {
	ns := b.Namespace(t)
	b.fleet(t, ns)
	before := b.resourceVersions(t, ns)
	for _, flag := range []string{"--dry-run", "--dry-run=client"} {
		var c kubeenv.Counter
		b.run(t, invocation{clock: pastGrace(), counter: &c}, "repair", "-n", ns, flag, "--yes").ExpectCode(t, cli.ExitNeedsHuman).
			OutHas(t, "Dry run: nothing was changed.", "Planned changes (5)")
		expectN(t, flag+": writes", c.Writes(), 0)
	}
	after := b.resourceVersions(t, ns)
	if fmt.Sprint(before) != fmt.Sprint(after) {
		t.Errorf("resourceVersions changed:\nbefore %v\nafter  %v", before, after)
	}
	b.run(t, invocation{}, "repair", "-n", ns, "--dry-run=server").ExpectCode(t, cli.ExitError).ErrHas(t, "--dry-run=server is not supported")

	var c kubeenv.Counter
	r := b.run(t, invocation{clock: pastGrace(), counter: &c}, "repair", "-n", ns, "--yes").ExpectCode(t, cli.ExitNeedsHuman)
	expectN(t, "writes (2 adopt, 2 releases of a release mark and a delete each, 1 orphan's mark)", c.Writes(), 7)
	r.OutHas(t, "Done: 2 adopted, 2 released, 1 marked; 0 failed.", "2 locks need a person",
		"Marked orphan locks are collected by a repair run 10m0s or more from now")
	got := byCluster(b.listJSON(t, ns))
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
	b.run(t, invocation{counter: &c}, "repair", "-n", ns, "--yes").ExpectCode(t, cli.ExitNeedsHuman)
	expectN(t, "writes of the second repair", c.Writes(), 0)
}

// An orphan lock is marked by a first repair and collected by one run after
// the grace period, not before.
func repairCollectsOrphanAfterGrace(t *testing.T, b *Backend) {
	ns := b.Namespace(t)
	b.newLock(t, ns, "c1", "m-gone", nil)
	clk := testingclock.NewFakePassiveClock(time.Now())
	inv := invocation{clock: clk}

	repair := func() Result {
		return b.run(t, inv, "repair", "-n", ns, "--orphan-grace=10m", "--yes").ExpectCode(t, cli.ExitOK)
	}
	repair().OutHas(t, "mark-orphan", "marked")
	if kubeenv.MustGetLock(t, b.Client, ns, "c1").Annotations[wire.ClusterAbsentAnnotation] == "" {
		t.Fatal("lock not marked")
	}

	clk.SetTime(clk.Now().Add(5 * time.Minute))
	r := repair()
	r.OutHas(t, "Left as they are for now (1)")
	b.expectLock(t, ns, true, r)

	clk.SetTime(clk.Now().Add(6 * time.Minute))
	r = repair()
	r.OutHas(t, "collected")
	b.expectLock(t, ns, false, r)
}

// repair never deletes a lock whose holder exists while the control plane is
// not initialised, whatever the policy and the lock's state.
func repairNeverDeletesLockOfRunningInit(t *testing.T, b *Backend) {
	for _, tc := range []struct {
		name string
		// setup makes cluster c1 (unless orphan), machine m1 and lock c1-lock
		// held by m1.
		setup func(t *testing.T, ns string)
		args  []string
	}{
		{"owned", func(t *testing.T, ns string) {
			cl := b.newCluster(t, ns, "c1", false)
			b.newLock(t, ns, "c1", "m1", cl)
		}, nil},
		{"unowned after restore", func(t *testing.T, ns string) {
			b.newCluster(t, ns, "c1", false)
			b.newLock(t, ns, "c1", "m1", nil)
		}, nil},
		{"owned by another cluster", func(t *testing.T, ns string) {
			other := b.newCluster(t, ns, "c2", false)
			b.newCluster(t, ns, "c1", false)
			b.newLock(t, ns, "c1", "m1", other)
		}, nil},
		{"stale cluster-absent mark", func(t *testing.T, ns string) {
			cl := b.newCluster(t, ns, "c1", false)
			cm := b.newLock(t, ns, "c1", "m1", cl)
			cm.Annotations = map[string]string{wire.ClusterAbsentAnnotation: "2020-01-01T00:00:00Z some-old-uid"}
			if err := b.Client.Update(t.Context(), cm); err != nil {
				t.Fatal(err)
			}
		}, []string{"--orphan-grace=0s"}},
		{"no release policy", func(t *testing.T, ns string) {
			b.newCluster(t, ns, "c1", false)
			b.newLock(t, ns, "c1", "m1", nil)
		}, []string{"--release-after-init=false", "--orphan-grace=0s"}},
		{"cluster missing, mark expired", func(t *testing.T, ns string) {
			b.newLock(t, ns, "c1", "m1", nil)
		}, []string{"--orphan-grace=0s"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ns := b.Namespace(t)
			b.newMachine(t, ns, "c1", "m1", nil)
			tc.setup(t, ns)
			clk := testingclock.NewFakePassiveClock(time.Now())
			// Three rounds, each a grace period apart, so that every
			// two-step action would have had its chance.
			for range 3 {
				r := b.run(t, invocation{clock: clk}, append([]string{"repair", "-n", ns, "--yes"}, tc.args...)...).ExpectCode(t, cli.ExitOK)
				b.expectLock(t, ns, true, r) // of a running init
				cm := kubeenv.MustGetLock(t, b.Client, ns, "c1")
				if rec, err := wire.DecodeRecord(cm.Data[wire.DataKey]); err != nil || rec.MachineName != "m1" {
					t.Fatalf("lock record changed: %q (%v)", cm.Data[wire.DataKey], err)
				}
				clk.SetTime(clk.Now().Add(time.Hour))
			}
		})
	}
}

// interfere returns a hook that, before each of the first n writes (verb)
// to the lock of cluster goes out, changes the lock with the admin client,
// so that the write meets a conflict.
func (b *Backend) interfere(t *testing.T, verb, ns, cluster string, n int, change func(ctx context.Context, c client.Client, cm *corev1.ConfigMap) error) Before {
	var left atomic.Int32
	left.Store(int32(n))
	var mu sync.Mutex
	return func(ctx context.Context, r kubeenv.Request) {
		if r.Verb != verb || r.Resource != "configmaps" || r.Namespace != ns || r.Name != cluster+wire.LockSuffix || left.Add(-1) < 0 {
			return
		}
		mu.Lock()
		defer mu.Unlock()
		cm := kubeenv.MustGetLock(t, b.Client, ns, cluster)
		if err := change(ctx, b.Client, cm); err != nil {
			t.Errorf("interfering: %v", err)
		}
	}
}

func touch(ctx context.Context, c client.Client, cm *corev1.ConfigMap) error {
	if cm.Annotations == nil {
		cm.Annotations = map[string]string{}
	}
	cm.Annotations["example.test/touched"] = time.Now().Format(time.RFC3339Nano)
	return c.Update(ctx, cm)
}

// A lock that changes while repair writes it is observed and decided again.
func repairRetriesAfterConflict(t *testing.T, b *Backend) {
	t.Run("changed", func(t *testing.T) {
		ns := b.Namespace(t)
		b.unowned(t, ns, "c1")
		var c kubeenv.Counter
		b.run(t, invocation{counter: &c, before: b.interfere(t, "patch", ns, "c1", 1, touch)}, "repair", "-n", ns, "--yes").ExpectCode(t, cli.ExitOK)
		expectN(t, "patches (a conflict, then the adoption)", c.Count("patch"), 2)
		if got := byCluster(b.listJSON(t, ns))["c1"]; got.Verdict != "healthy" {
			t.Errorf("after repair: %+v", got)
		}
	})
	t.Run("deleted", func(t *testing.T) {
		ns := b.Namespace(t)
		cl := b.newCluster(t, ns, "c1", true)
		b.newLock(t, ns, "c1", "m1", cl)
		var c kubeenv.Counter
		del := func(ctx context.Context, c client.Client, cm *corev1.ConfigMap) error {
			// Another release's delete of the lock repair has marked.
			return c.Delete(ctx, cm, client.Preconditions{UID: &cm.UID, ResourceVersion: &cm.ResourceVersion})
		}
		b.run(t, invocation{counter: &c, before: b.interfere(t, "delete", ns, "c1", 1, del)}, "repair", "-n", ns, "--yes").ExpectCode(t, cli.ExitOK).
			OutHas(t, "now free, nothing to do")
	})
	t.Run("keeps changing", func(t *testing.T) {
		ns := b.Namespace(t)
		b.unowned(t, ns, "c1")
		var c kubeenv.Counter
		b.run(t, invocation{counter: &c, before: b.interfere(t, "patch", ns, "c1", 100, touch)}, "repair", "-n", ns, "--yes").ExpectCode(t, cli.ExitError).
			ErrHas(t, `configmap "c1-lock": adopt: the lock changed 5 times in a row`)
		expectN(t, "patches (bounded)", c.Count("patch"), 5)
	})
}

func repairConfirmationAndProgressOnTerminal(t *testing.T, b *Backend) {
	setup := func(t *testing.T) string {
		ns := b.Namespace(t)
		b.unowned(t, ns, "c1")
		return ns
	}
	t.Run("declined", func(t *testing.T) {
		ns := setup(t)
		var c kubeenv.Counter
		b.run(t, invocation{terminal: true, stdin: "n\n", counter: &c}, "repair", "-n", ns).ExpectCode(t, cli.ExitError).
			ErrHas(t, "Apply 1 change? [y/N]: ", "repair aborted; nothing was changed")
		expectN(t, "writes of the declined repair", c.Writes(), 0)
	})
	t.Run("accepted with progress bar", func(t *testing.T) {
		ns := setup(t)
		b.run(t, invocation{terminal: true, stdin: "yes\n", progressThreshold: 1}, "repair", "-n", ns).ExpectCode(t, cli.ExitOK).
			ErrHas(t, "\rrepairing [..............................] 0/1", "\rrepairing [##############################] 1/1")
	})
	t.Run("--yes does not ask", func(t *testing.T) {
		ns := setup(t)
		r := b.run(t, invocation{terminal: true}, "repair", "-n", ns, "--yes").ExpectCode(t, cli.ExitOK)
		if strings.Contains(r.Out+r.Err, "[y/N]") {
			t.Errorf("asked despite --yes:\n%s%s", r.Out, r.Err)
		}
	})
}

func repairExitCodes(t *testing.T, b *Backend) {
	t.Run("healthy", func(t *testing.T) {
		ns := b.Namespace(t)
		b.held(t, ns, "c1", false)
		b.run(t, invocation{}, "repair", "-n", ns, "--yes").ExpectCode(t, cli.ExitOK)
	})
	t.Run("corrupt", func(t *testing.T) {
		ns := b.Namespace(t)
		cl := b.newCluster(t, ns, "c1", false)
		b.newConfigMap(t, ns, "c1-lock", map[string]string{wire.ClusterNameLabel: "c1"}, map[string]string{wire.DataKey: `{"machineName":""}`}, cl)
		b.run(t, invocation{}, "repair", "-n", ns, "--yes").ExpectCode(t, cli.ExitNeedsHuman).OutHas(t, "kubectl initlock release c1 -n "+ns+" --force")
	})
	t.Run("foreign", func(t *testing.T) {
		ns := b.Namespace(t)
		b.newCluster(t, ns, "c1", false)
		b.newConfigMap(t, ns, "c1-lock", nil, nil, nil)
		b.run(t, invocation{}, "repair", "-n", ns, "--yes").ExpectCode(t, cli.ExitNeedsHuman).
			OutHas(t, `configmap "c1-lock" is not an init lock (no cluster.x-k8s.io/cluster-name label); refusing to touch it`)
	})
}
