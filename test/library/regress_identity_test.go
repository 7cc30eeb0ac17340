package library_test

import (
	"errors"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/initlock/initlock/internal/kubeenv"
	"github.com/initlock/initlock/internal/kubeenv/wire"
	"github.com/initlock/initlock/pkg/initlock"
	"github.com/initlock/initlock/pkg/initlock/capi"
)

// reincarnate locks for m1, deletes it and creates it again under the same
// name, and has the new incarnation take the lock. It returns the stale
// object of the first incarnation, the Cluster as a cache showed it with
// the first incarnation's grant, and the new incarnation.
func (f *fixture) reincarnate(t *testing.T) (stale, cachedBefore, cachedOld, live *unstructured.Unstructured) {
	t.Helper()
	cachedBefore = snapshot(f.cluster)
	stale = f.machine("m1")
	f.mustLock(stale)
	cachedOld = snapshot(f.cluster)
	kubeenv.DeleteAndWait(t, env.Client, stale.DeepCopy())
	live = f.create(kubeenv.NewMachine(capi.V1Beta2, f.ns, "c1", "m1"))
	if live.GetUID() == stale.GetUID() {
		t.Fatal("the Machine created again kept its UID")
	}
	res := f.lockLive(t, live, "m1")
	if res.Action != "take-over" {
		t.Fatalf("Lock(new m1) action = %s, want %s: the grant of the deleted incarnation does not count", res.Action, "take-over")
	}
	if g := f.grant(); g.MachineUID != live.GetUID() {
		t.Fatalf("register = %s, want the new incarnation %s", g.Raw(), live.GetUID())
	}
	return stale, cachedBefore, cachedOld, live
}

// unchanged returns a check that the register and the lock are still what
// they are now.
func (f *fixture) unchanged(t *testing.T) func(what string) {
	t.Helper()
	raw := f.grant().Raw()
	rv := f.lockCM().ResourceVersion
	return func(what string) {
		t.Helper()
		if g := f.grant().Raw(); g != raw {
			t.Errorf("%s changed the register: %s, was %s", what, g, raw)
		}
		if got := f.lockCM().ResourceVersion; got != rv {
			t.Errorf("%s changed the lock: resourceVersion %s, was %s", what, got, rv)
		}
	}
}

// TestRegressionStaleMachineObject: a bootstrap provider holds a Machine
// object from its cache after the Machine was deleted and created again
// under the same name. An earlier Lock and Unlock matched Machines by name
// alone: Lock with the stale object was told it held the grant of the new
// incarnation (two incarnations of m1 running init), and Unlock with it
// released the new incarnation's grant and lock, so a second Machine got
// them.
//
// What makes it safe now: Lock and Unlock read the caller's Machine live
// and refuse an object whose UID is not the live one's (ErrStaleMachine):
// Lock before it writes the lock, and withdrawing a claim it made for the
// stale object; Unlock before it writes anything, reading the Machine
// after the lock and the Cluster.
func TestRegressionStaleMachineObject(t *testing.T) {
	t.Run("Lock with the stale object is refused and displaces nothing", func(t *testing.T) {
		f := newFixture(t)
		stale, cachedBefore, cachedOld, live := f.reincarnate(t)
		m2 := f.machine("m2")
		same := f.unchanged(t)

		for _, tc := range []struct {
			name          string
			cluster       *unstructured.Unstructured
			reads, writes int
		}{
			// The Cluster as the cache showed it with the old grant: GET
			// lock ∥ GET Cluster ∥ GET m1.
			{"cached with the old grant", cachedOld, 3, 0},
			// The Cluster as the cache showed it before any grant: the free
			// path's claim fails on the server (422) and no lock is written;
			// the live read refuses the stale object.
			{"cached before any grant", cachedBefore, 4, 1},
		} {
			f.counter.Reset()
			res, err := f.locker.Lock(t.Context(), tc.cluster, stale)
			if !errors.Is(err, initlock.ErrStaleMachine) || res.Acquired {
				t.Fatalf("Lock(stale m1, %s) = %+v, %v; want ErrStaleMachine", tc.name, res, err)
			}
			expectNames(t, err, string(stale.GetUID()), "call again with the live Machine")
			f.counts(t, "Lock(stale m1, "+tc.name+")", tc.reads, tc.writes)
			same("Lock(stale m1, " + tc.name + ")")
		}

		f.lockLive(t, m2, "m1")
		f.counter.Reset()
		f.lockLive(t, live, "m1")
		f.counts(t, "re-Lock(new m1)", 3, 0)
		same("re-Lock(new m1)")
	})

	t.Run("Unlock with the stale object releases nothing", func(t *testing.T) {
		f := newFixture(t)
		stale, _, cachedOld, live := f.reincarnate(t)
		m2 := f.machine("m2")
		same := f.unchanged(t)

		f.counter.Reset()
		err := f.locker.Unlock(t.Context(), cachedOld, stale)
		if !errors.Is(err, initlock.ErrStaleMachine) {
			t.Fatalf("Unlock(stale m1) error = %v, want ErrStaleMachine", err)
		}
		expectNames(t, err, string(stale.GetUID()), string(live.GetUID()))
		// GET lock ∥ GET Cluster; GET m1; nothing written.
		f.counts(t, "Unlock(stale m1)", 3, 0)
		same("Unlock(stale m1)")

		f.lockLive(t, m2, "m1")
		f.lockLive(t, live, "m1")
		same("re-Lock(new m1)")
		f.expectHeld(t, "m1")
	})
}

// TestRegressionStaleCallerLeavesNothing: with an empty register, Lock
// with a stale Machine object (deleted and created again since) wrote a
// grant and a lock for the stale UID before it refused the caller; and an
// Unlock refused because the lock names another incarnation of the same
// name said "held by m1, not m1".
//
// What makes it safe now: the lock is written only once the caller's
// Machine, read with the claim, is the caller's object, and a claim made
// for a stale object is withdrawn before the call returns; the refusal
// names both UIDs.
func TestRegressionStaleCallerLeavesNothing(t *testing.T) {
	t.Run("Lock with an empty register", func(t *testing.T) {
		f := newFixture(t)
		stale := f.machine("m1")
		kubeenv.DeleteAndWait(t, env.Client, stale.DeepCopy())
		live := f.create(kubeenv.NewMachine(capi.V1Beta2, f.ns, "c1", "m1"))

		f.counter.Reset()
		res, err := f.locker.Lock(t.Context(), f.cluster, stale)
		if !errors.Is(err, initlock.ErrStaleMachine) || res.Acquired {
			t.Fatalf("Lock(stale m1) = %+v, %v; want ErrStaleMachine", res, err)
		}
		expectNames(t, err, string(stale.GetUID()), string(live.GetUID()))
		// PATCH claim ∥ GET m1 (another UID); GET lock ∥ GET Cluster ∥ GET
		// m1; PATCH register (the claim withdrawn). No lock write.
		f.counts(t, "Lock(stale m1)", 4, 2)
		if cm := kubeenv.MustGetLock(f.t, env.Client, f.ns, "c1"); cm != nil {
			t.Errorf("a lock was left behind: %s", cm.Data[wire.DataKey])
		}
		if g := f.grant(); g.Held() {
			t.Errorf("a grant was left behind: %s", g.Raw())
		}
		f.lockLive(t, live, "m1")
		f.expectHeld(t, "m1")
	})

	t.Run("Unlock of another incarnation's lock names both UIDs", func(t *testing.T) {
		f := newFixture(t)
		old := f.machine("m1")
		f.mustLock(old)
		kubeenv.DeleteAndWait(t, env.Client, old.DeepCopy())
		live := f.create(kubeenv.NewMachine(capi.V1Beta2, f.ns, "c1", "m1"))
		same := f.unchanged(t)
		err := f.locker.Unlock(t.Context(), f.get(f.cluster), live)
		if !errors.Is(err, initlock.ErrNotHolder) {
			t.Fatalf("Unlock(new m1) = %v, want ErrNotHolder: the lock names the deleted incarnation", err)
		}
		expectNames(t, err, string(old.GetUID()), string(live.GetUID()))
		same("Unlock(new m1)")
	})
}
