package library_test

import (
	"errors"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/initlock/initlock/internal/kubeenv"
	"github.com/initlock/initlock/internal/kubeenv/wire"
	"github.com/initlock/initlock/pkg/initlock"
	"github.com/initlock/initlock/pkg/initlock/capi"
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
			if err != nil || res.Acquired || res.RetryAfter != 30*time.Second {
				t.Fatalf("Lock(m1) with an unpaused view of a paused Cluster = %+v, %v; want refused at once", res, err)
			}
			// PATCH claim (422: its test of the pause failed) ∥ GET m1, and
			// nothing else. The failed claim is the one write: no lock
			// write at all.
			f.counts(t, "Lock(m1)", 1, 1)
			if n := f.counter.Count("create", "update", "delete"); n != 0 {
				t.Errorf("Lock(m1) made %d lock writes, want none", n)
			}
			if rv := f.get(f.cluster).GetResourceVersion(); rv != live.GetResourceVersion() {
				t.Errorf("the paused Cluster was written: resourceVersion %s, was %s", rv, live.GetResourceVersion())
			}
			if g := f.grant(); g != nil {
				t.Errorf("register of the paused Cluster = %s, want none", g.Raw())
			}
			if leftover := kubeenv.MustGetLock(f.t, env.Client, f.ns, "c1"); leftover != nil {
				t.Errorf("Lock(m1) returned ErrClusterPaused but wrote a lock: %s", leftover.Data[wire.DataKey])
			}

			// Once unpaused, the next Machine to ask gets the lock.
			f.update(func(u *unstructured.Unstructured) {
				unstructured.RemoveNestedField(u.Object, "spec", "paused")
				u.SetAnnotations(nil)
			})
			f.lockLive(t, m2, "m2")
			f.expectHeld(t, "m2")
		})
	}
}

// TestRegressionPauseDuringLock: a Lock is in flight (it read everything
// live, unpaused) when the Cluster is paused. An earlier Lock sent the
// register's claim and the lock's rewrite in parallel; only the claim
// tests the pause, so it failed (422) while the rewrite landed, and the
// next round, reading the Cluster paused, found "the lock carries my
// token, the register none of mine" and deleted a lock that had named the
// caller before the call began. With one protection already lost, a
// second Machine was then granted the lock while the first existed.
//
// What makes it safe now: the lock is written only once the claim is,
// and a Lock call never deletes a lock: here the claim fails, nothing
// else is written, and the lock that named m1 still stands.
func TestRegressionPauseDuringLock(t *testing.T) {
	for _, tc := range []struct {
		name string
		// setup leaves a lock naming m1, and returns what m1's provider
		// passes to Lock.
		setup func(t *testing.T, f *fixture, m1 *unstructured.Unstructured) *unstructured.Unstructured
	}{{
		name: "m1's lock deleted and recreated for it by a refused caller",
		setup: func(t *testing.T, f *fixture, m1 *unstructured.Unstructured) *unstructured.Unstructured {
			f.mustLock(m1)
			if err := env.Client.Delete(t.Context(), f.lockCM()); err != nil {
				t.Fatal(err)
			}
			if res := f.mustLock(f.machine("m3")); res.Acquired || !res.Recreated {
				t.Fatalf("Lock(m3) = %+v, want refused, the lock recreated for m1", res)
			}
			return f.get(f.cluster)
		},
	}, {
		name: "the register lost (annotation edited away)",
		setup: func(t *testing.T, f *fixture, m1 *unstructured.Unstructured) *unstructured.Unstructured {
			f.mustLock(m1)
			return f.update(func(u *unstructured.Unstructured) { u.SetAnnotations(nil) })
		},
	}, {
		name: "a lock written by stock CABPK for m1",
		setup: func(t *testing.T, f *fixture, m1 *unstructured.Unstructured) *unstructured.Unstructured {
			f.upstreamLock("m1", f.clusterRef())
			return f.get(f.cluster)
		},
	}} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t)
			m1, m2 := f.machine("m1"), f.machine("m2")
			view := tc.setup(t, f, m1)
			before := f.lockCM()
			if f.lockHolder() != "m1" {
				t.Fatalf("lock held by %s before the call, want m1", f.lockHolder())
			}

			// The Cluster is paused (as an operator pauses it, with
			// spec.paused) just before the first claim of the register reaches
			// the server: while the Lock is in flight, after its live read.
			paused := 0
			f.withFaults(t, func(w write) (outcome, error) {
				if w.verb == "patch" && w.obj.GetObjectKind().GroupVersionKind().Kind == "Cluster" && paused == 0 {
					paused++
					f.update(kubeenv.Paused)
				}
				return pass, nil
			})
			res, err := f.locker.Lock(t.Context(), view, m1)
			if paused != 1 {
				t.Fatalf("attack not exercised: %d pauses while the Lock was in flight", paused)
			}
			// Refused: by the free path at once (its claim's test of the
			// pause failed), or by settle with ErrClusterPaused.
			if res.Acquired || (err != nil && !errors.Is(err, initlock.ErrClusterPaused)) {
				t.Fatalf("Lock(m1) with a pause in flight = %+v, %v; want refused, or ErrClusterPaused", res, err)
			}
			after := kubeenv.MustGetLock(f.t, env.Client, f.ns, "c1")
			if after == nil {
				t.Fatal("the lock that named m1 before the call was deleted")
			}
			if after.UID != before.UID || after.ResourceVersion != before.ResourceVersion {
				t.Errorf("the lock was written while the Cluster was paused: resourceVersion %s, was %s", after.ResourceVersion, before.ResourceVersion)
			}

			f.update(func(u *unstructured.Unstructured) { unstructured.RemoveNestedField(u.Object, "spec", "paused") })
			f.lockLive(t, m2, "m1")
			f.lockLive(t, m1, "m1")
			f.expectHeld(t, "m1")
		})
	}
}
