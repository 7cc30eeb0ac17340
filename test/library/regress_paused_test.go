package library_test

import (
	"errors"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/initlock/initlock/internal/capi"
	"github.com/initlock/initlock/internal/kubeenv"
	"github.com/initlock/initlock/pkg/initlock"
)

// TestRegressionPausedLiveFreePath: the caller's Cluster comes from a cache
// that shows it unpaused with an empty register, while the live Cluster
// has been paused (a restore or a move is under way). An earlier free path
// wrote its claim into the paused Cluster and created the lock, and a
// restore or move then carried a grant and a lock decided on objects that
// were still arriving.
//
// A later version still created the lock in parallel with the claim and
// deleted it once it saw the pause: a create and a delete in a paused
// cluster, and a backup taken between them held a lock naming a Machine
// that was never granted it.
//
// What makes it safe now: the claim is a JSON patch that tests that the
// Cluster is not paused (spec.paused as read, and no paused annotation),
// and the lock is written only once the claim is: the server refuses the
// claim (422), neither the Cluster nor the lock is written, and the call
// reads the Cluster live and returns ErrClusterPaused.
func TestRegressionPausedLiveFreePath(t *testing.T) {
	for _, tc := range []struct {
		name  string
		pause func(*unstructured.Unstructured)
	}{
		{"spec.paused", kubeenv.Paused},
		{"paused annotation", func(u *unstructured.Unstructured) {
			u.SetAnnotations(map[string]string{capi.PausedAnnotation: "true"})
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t)
			m1, m2 := f.machine("m1"), f.machine("m2")
			cached := snapshot(f.cluster)
			live := f.update(tc.pause)

			f.counter.Reset()
			res, err := f.locker.Lock(t.Context(), cached, m1)
			if !errors.Is(err, initlock.ErrClusterPaused) || res.Acquired {
				t.Fatalf("Lock(m1) with an unpaused view of a paused Cluster = %+v, %v; want ErrClusterPaused", res, err)
			}
			// PATCH claim (422) ∥ GET m1; GET lock ∥ GET Cluster ∥ GET m1.
			// The failed claim is the one write: no lock write at all.
			f.counts(t, "Lock(m1)", 4, 1)
			if n := f.counter.Count("create", "update", "delete"); n != 0 {
				t.Errorf("Lock(m1) made %d lock writes, want none", n)
			}
			if rv := f.get(f.cluster).GetResourceVersion(); rv != live.GetResourceVersion() {
				t.Errorf("the paused Cluster was written: resourceVersion %s, was %s", rv, live.GetResourceVersion())
			}
			if g := f.grant(); g != nil {
				t.Errorf("register of the paused Cluster = %s, want none", g.Raw())
			}
			if leftover := f.tryLockCM(); leftover != nil {
				t.Errorf("Lock(m1) returned ErrClusterPaused but wrote a lock: %s", leftover.Data[initlock.DataKey])
			}

			// Once unpaused, the next Machine to ask gets the lock.
			f.update(func(u *unstructured.Unstructured) {
				unstructured.RemoveNestedField(u.Object, "spec", "paused")
				u.SetAnnotations(nil)
			})
			res, err = f.locker.Lock(t.Context(), f.get(f.cluster), m2)
			expectAcquired(t, "m2", res, err)
			f.expectHeld(t, "m2")
		})
	}
}
