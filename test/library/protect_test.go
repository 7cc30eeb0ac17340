package library_test

import (
	"slices"
	"testing"

	"github.com/initlock/initlock/internal/kubeenv"
	"github.com/initlock/initlock/pkg/initlock/engine"
)

// protect puts initlock-manager's finalizer on the lock, as the manager
// does to a held lock.
func (f *fixture) protect(t *testing.T) {
	t.Helper()
	cm := f.lockCM()
	cm.Finalizers = append(cm.Finalizers, engine.HeldFinalizer)
	if err := env.Client.Update(t.Context(), cm); err != nil {
		t.Fatal(err)
	}
}

// TestUnlockProtectedLock: the holder releases a lock initlock-manager
// protects. The finalizer is the manager's guard against deletes by others
// while the holder may run init; the holder's own release takes it off
// first, then deletes the lock, so that the lock goes at once.
func TestUnlockProtectedLock(t *testing.T) {
	f := newFixture(t)
	m1, m2 := f.machine("m1"), f.machine("m2")
	f.mustLock(m1)
	f.protect(t)

	f.counter.Reset()
	if err := f.locker.Unlock(t.Context(), f.cluster, m1); err != nil {
		t.Fatal(err)
	}
	// GET lock ∥ GET Cluster; GET m1; PATCH retire; PATCH withdraw; PATCH
	// the finalizer off; DELETE.
	f.counts(t, "Unlock(m1) of a protected lock", 3, 4)
	if cm := kubeenv.MustGetLock(f.t, env.Client, f.ns, "c1"); cm != nil {
		t.Fatalf("lock still exists (finalizers %v, deleting %v)", cm.Finalizers, cm.DeletionTimestamp != nil)
	}
	res, err := f.locker.Lock(t.Context(), f.get(f.cluster), m2)
	expectAcquired(t, "m2", res, err)
}

// TestLockHeldWhileBeingDeleted: a protected lock is deleted (the garbage
// collector, an operator): it stays, being deleted, and keeps protecting
// its holder. Another Machine is refused; the holder's re-Lock still holds
// it without a write.
func TestLockHeldWhileBeingDeleted(t *testing.T) {
	f := newFixture(t)
	m1, m2 := f.machine("m1"), f.machine("m2")
	f.mustLock(m1)
	f.protect(t)
	if err := env.Client.Delete(t.Context(), f.lockCM()); err != nil {
		t.Fatal(err)
	}
	cm := f.lockCM()
	if cm.DeletionTimestamp == nil || !slices.Contains(cm.Finalizers, engine.HeldFinalizer) {
		t.Fatalf("lock after the delete: deleting %v, finalizers %v; want it held", cm.DeletionTimestamp != nil, cm.Finalizers)
	}
	res, err := f.locker.Lock(t.Context(), f.get(f.cluster), m2)
	expectRefused(t, "m2", res, err, "m1")
	f.counter.Reset()
	res, err = f.locker.Lock(t.Context(), f.get(f.cluster), m1)
	expectAcquired(t, "m1", res, err)
	f.counts(t, "re-Lock(m1) of a held lock being deleted", 3, 0)
}
