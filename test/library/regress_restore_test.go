package library_test

import (
	"context"
	"errors"
	"sync"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	"github.com/initlock/initlock/internal/kubeenv"
	"github.com/initlock/initlock/pkg/initlock"
	"github.com/initlock/initlock/pkg/initlock/locking"
)

// restoreAtMachineRead returns a Locker whose client, at the first GET of
// a Machine, has the namespace deleted and restored from objs: before that
// read reaches the server (before), or right after it, holding back the
// other reads of the round until the restore is done. Either way the reads
// of one round straddle a restore. fired counts the restores done.
func (f *fixture) restoreAtMachineRead(t *testing.T, objs []*unstructured.Unstructured, before bool) (l *initlock.Locker, fired *int, restored func() map[string]*unstructured.Unstructured) {
	t.Helper()
	var (
		mu   sync.Mutex
		once sync.Once
		done = make(chan struct{})
		n    int
		out  map[string]*unstructured.Unstructured
	)
	restore := func() {
		f.deleteAll(objs)
		mu.Lock()
		out = f.restore(objs)
		n++
		mu.Unlock()
		close(done)
	}
	base, err := client.NewWithWatch(f.counter.CountingConfig(env.Config), client.Options{Scheme: kubeenv.Scheme()})
	if err != nil {
		t.Fatal(err)
	}
	c := interceptor.NewClient(base, interceptor.Funcs{
		Get: func(ctx context.Context, c client.WithWatch, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
			if obj.GetObjectKind().GroupVersionKind().Kind == "Machine" {
				var err error
				first := false
				once.Do(func() {
					first = true
					if before {
						restore()
						err = c.Get(ctx, key, obj, opts...)
						return
					}
					err = c.Get(ctx, key, obj, opts...)
					restore()
				})
				if first {
					return err
				}
				return c.Get(ctx, key, obj, opts...)
			}
			if before {
				return c.Get(ctx, key, obj, opts...)
			}
			select {
			case <-done:
			case <-ctx.Done():
				return ctx.Err()
			}
			return c.Get(ctx, key, obj, opts...)
		},
	})
	return initlock.New(c), &n, func() map[string]*unstructured.Unstructured {
		mu.Lock()
		defer mu.Unlock()
		return out
	}
}

// TestRegressionStaleUnlockAcrossRestore: m1 holds the lock; the namespace
// is backed up, deleted and restored (new UIDs, the records naming m1 by
// name). An Unlock made with m1's pre-restore object (a reconcile in
// flight across the restore, or a cached copy) matched the records by
// name, released both protections, and Lock(m2) was then told Acquired
// while the restored m1, which never unlocked, existed.
//
// What makes it safe now: Unlock reads the caller's Machine live, after
// the lock and the Cluster, and refuses an object whose UID is not the
// live one's (ErrStaleMachine, naming both UIDs), and a Cluster object
// that is not the live Cluster (ErrStaleCluster); a restore after those
// reads makes every write of the release fail its preconditions.
func TestRegressionStaleUnlockAcrossRestore(t *testing.T) {
	setup := func(t *testing.T) (f *fixture, oldCluster, oldM1 *unstructured.Unstructured, objs []*unstructured.Unstructured) {
		f = newFixture(t)
		oldM1 = f.machine("m1")
		f.machine("m2")
		f.mustLock(oldM1)
		return f, snapshot(f.cluster), snapshot(oldM1), f.backup()
	}
	// after checks that the restored m1 still holds the lock: m2 is
	// refused, the restored m1 is granted it.
	after := func(t *testing.T, f *fixture, restored map[string]*unstructured.Unstructured) {
		t.Helper()
		f.cluster = restored["Cluster/c1"]
		f.lockLive(t, f.get(restored["Machine/m2"]), "m1")
		f.lockLive(t, f.get(restored["Machine/m1"]), "m1")
		f.expectHeld(t, "m1")
	}

	t.Run("Unlock after the restore with the pre-restore objects", func(t *testing.T) {
		f, oldCluster, oldM1, objs := setup(t)
		f.deleteAll(objs)
		restored := f.restore(objs)
		newM1 := restored["Machine/m1"]
		if newM1.GetUID() == oldM1.GetUID() {
			t.Fatal("attack not exercised: the restored m1 kept its UID")
		}
		f.cluster = restored["Cluster/c1"]
		same := f.unchanged(t)

		f.counter.Reset()
		err := f.locker.Unlock(t.Context(), oldCluster, oldM1)
		if !errors.Is(err, initlock.ErrStaleCluster) {
			t.Fatalf("Unlock(pre-restore Cluster, pre-restore m1) = %v, want ErrStaleCluster", err)
		}
		f.counts(t, "Unlock(pre-restore objects)", 3, 0)
		err = f.locker.Unlock(t.Context(), f.get(f.cluster), oldM1)
		if !errors.Is(err, initlock.ErrStaleMachine) {
			t.Fatalf("Unlock(live Cluster, pre-restore m1) = %v, want ErrStaleMachine", err)
		}
		expectNames(t, err, string(oldM1.GetUID()), string(newM1.GetUID()))
		// CABPK's mutex releases any holder, with the Cluster object of its
		// reconcile: one from before the restore is refused.
		mutex := locking.NewControlPlaneInitMutex[*unstructured.Unstructured, *unstructured.Unstructured](f.client)
		if mutex.Unlock(t.Context(), oldCluster) {
			t.Error("the mutex's Unlock with the pre-restore Cluster released the lock")
		}
		same("the stale Unlocks")
		after(t, f, restored)
	})

	t.Run("a restore between the Unlock's reads", func(t *testing.T) {
		f, _, oldM1, objs := setup(t)
		// Unlock reads the lock and the Cluster, then the Machine: the
		// restore comes between them.
		locker, fired, restored := f.restoreAtMachineRead(t, objs, true)
		err := locker.Unlock(t.Context(), f.cluster, oldM1)
		if *fired != 1 {
			t.Fatalf("attack not exercised: %d restores during the Unlock", *fired)
		}
		if !errors.Is(err, initlock.ErrStaleMachine) {
			t.Fatalf("Unlock with the pre-restore objects across a restore = %v, want ErrStaleMachine", err)
		}
		f.cluster = restored()["Cluster/c1"]
		if g := f.grant(); !g.Held() || g.MachineName != "m1" {
			t.Fatalf("register after the refused Unlock = %s, want m1's restored grant", g.Raw())
		}
		if h := f.lockHolder(); h != "m1" {
			t.Fatalf("lock holder after the refused Unlock = %s, want m1", h)
		}
		after(t, f, restored())
	})
}

// TestRegressionStaleLockAcrossRestore: m1 holds the lock; its provider
// calls Lock again with its pre-restore object while the namespace is
// restored, the Machine read before the restore and the lock and the
// Cluster after it. The records name m1 by name only (new UIDs), the stale
// object looked live, and the claim replaced the restored grant with one
// naming the stale UID: the restored m1, which holds the lock, was no
// longer protected by it, and a second Machine could take the lock over.
// The explorer found it (scenario restore-relock).
//
// What makes it safe now: a claim that replaces a grant naming the caller
// by name only is made only once the caller's Machine, read again after
// the Cluster, is the caller's object; here it is not, and nothing is
// written.
func TestRegressionStaleLockAcrossRestore(t *testing.T) {
	f := newFixture(t)
	m1 := f.machine("m1")
	f.machine("m2")
	f.mustLock(m1)
	oldCluster, oldM1 := snapshot(f.cluster), snapshot(m1)
	objs := f.backup()
	// Lock reads the lock, the Cluster and the Machine in parallel: the
	// Machine is read first, then the restore, then the others.
	locker, fired, restored := f.restoreAtMachineRead(t, objs, false)

	res, err := locker.Lock(t.Context(), oldCluster, oldM1)
	if *fired != 1 {
		t.Fatalf("attack not exercised: %d restores during the Lock", *fired)
	}
	if !errors.Is(err, initlock.ErrStaleMachine) || res.Acquired {
		t.Fatalf("Lock(pre-restore m1) across a restore = %+v, %v; want ErrStaleMachine", res, err)
	}
	f.cluster = restored()["Cluster/c1"]
	newM1 := restored()["Machine/m1"]
	g := f.grant()
	if !g.Held() || g.MachineName != "m1" || g.MachineUID == oldM1.GetUID() && g.ClusterUID == f.cluster.GetUID() {
		t.Fatalf("register = %s: it must still name m1 by name only, not the pre-restore UID %s under the restored Cluster", g.Raw(), oldM1.GetUID())
	}
	f.lockLive(t, f.get(restored()["Machine/m2"]), "m1")
	f.lockLive(t, f.get(newM1), "m1")
	f.expectHeld(t, "m1")
}
