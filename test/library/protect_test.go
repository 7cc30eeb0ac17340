package library_test

import (
	"slices"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/initlock/initlock/internal/kubeenv"
	"github.com/initlock/initlock/internal/kubeenv/wire"
)

// otherFinalizer is a finalizer of a controller other than initlock's.
const otherFinalizer = "example.com/keep"

// TestLockHeldWhileBeingDeleted: a lock being deleted, held back by another
// controller's finalizer, counts as held by the Machine it names until it
// is gone: another Machine is refused, and writes nothing to it; the
// holder's re-Lock still holds it without a write.
func TestLockHeldWhileBeingDeleted(t *testing.T) {
	f, m1, m2 := newFixtureWithLockBeingDeleted(t)
	held := f.lockCM()
	if held.DeletionTimestamp == nil || !slices.Contains(held.Finalizers, otherFinalizer) {
		t.Fatalf("lock after the delete: deleting %v, finalizers %v; want it held back", held.DeletionTimestamp != nil, held.Finalizers)
	}
	f.lockLive(t, m2, "m1")
	if after := f.lockCM(); after.ResourceVersion != held.ResourceVersion {
		t.Fatalf("a refused caller wrote the lock being deleted: %s", after.Data[wire.DataKey])
	}
	f.counter.Reset()
	f.lockLive(t, m1, "m1")
	f.counts(t, "re-Lock(m1) of a held lock being deleted", 3, 0)
}

// TestNoTakeOverOfALockBeingDeleted: a lock being deleted whose holder is
// gone is not taken over: a caller is refused until it is gone, then takes
// the lock.
func TestNoTakeOverOfALockBeingDeleted(t *testing.T) {
	f, m1, m2 := newFixtureWithLockBeingDeleted(t)
	kubeenv.DeleteAndWait(t, env.Client, m1)
	held := f.lockCM()
	f.lockLive(t, m2, "m1")
	if after := f.lockCM(); after == nil || after.ResourceVersion != held.ResourceVersion {
		t.Fatalf("the lock being deleted was written or went: %v", after)
	}
	gone := f.lockCM()
	gone.Finalizers = nil
	if err := env.Client.Update(t.Context(), gone); err != nil {
		t.Fatal(err)
	}
	kubeenv.Eventually(t, 10*time.Second, kubeenv.LockGone(t.Context(), env.Client, f.ns, "c1"))
	f.lockLive(t, m2, "m2")
}

// newFixtureWithLockBeingDeleted returns a fixture with Machines m1 and m2
// where m1's lock is being deleted, held back by otherFinalizer.
func newFixtureWithLockBeingDeleted(t *testing.T) (f *fixture, m1, m2 *unstructured.Unstructured) {
	f = newFixture(t)
	m1, m2 = f.machine("m1"), f.machine("m2")
	f.mustLock(m1)
	cm := f.lockCM()
	cm.Finalizers = append(cm.Finalizers, otherFinalizer)
	if err := env.Client.Update(t.Context(), cm); err != nil {
		t.Fatal(err)
	}
	if err := env.Client.Delete(t.Context(), f.lockCM()); err != nil {
		t.Fatal(err)
	}
	return f, m1, m2
}
