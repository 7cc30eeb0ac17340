package locksuite

import (
	"context"
	"fmt"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	"github.com/initlock/initlock/internal/kubeenv"
	"github.com/initlock/initlock/internal/kubeenv/wire"
	"github.com/initlock/initlock/pkg/initlock"
)

// staleClusters makes c answer reads of a Cluster with the copy in old, as
// a manager's cache that has not yet seen the Cluster deleted and created
// again under its name would.
func staleClusters(c client.WithWatch, old *unstructured.Unstructured) client.WithWatch {
	return interceptor.NewClient(c, interceptor.Funcs{
		Get: func(ctx context.Context, c client.WithWatch, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
			if u, ok := obj.(*unstructured.Unstructured); ok && u.GetKind() == "Cluster" && key == client.ObjectKeyFromObject(old) {
				old.DeepCopyInto(u)
				return nil
			}
			return c.Get(ctx, key, obj, opts...)
		},
	})
}

// CachedClusterRecreated is a regression test: the manager's cache still
// shows a Cluster that was deleted and created again under the same name. An
// earlier reconciler decided and wrote from that cached Cluster: it
// released the held lock of the new, uninitialised Cluster because the
// cached one was initialised, and it pointed the lock's ownerReference at
// the cached (dead) UID, after which the garbage collector deleted the
// lock. Either way a second Machine of the new Cluster got the lock while
// the first may be running init.
//
// What makes it safe now: every write the cache suggests is confirmed
// against the Cluster read live (keeper.Keeper.Keep) and decided again on
// it; the lock's write carries its resourceVersion or UID and
// resourceVersion as preconditions, and an adoption writes the UID read
// live. The garbage collector, which deletes a ConfigMap owned by the dead
// UID in the same namespace, leaves the lock alone (checked on a backend
// that runs it; on the others, the lock stands after the reconciles).
func CachedClusterRecreated(t *testing.T, b Backend) {
	for _, tc := range []struct {
		name string
		// oldInitialized marks the deleted Cluster's control plane
		// initialised before it was deleted.
		oldInitialized bool
		// lock creates the lock of the new Cluster held by m1.
		lock func(f *fixture, c, m1 *unstructured.Unstructured)
		// Over two reconciles: each reads m1 through the cache and, when
		// the cache suggests a write, the Cluster live to confirm it (and,
		// for a release, the holder m1); the second waits for the cache to
		// show a write the first made.
		wantReads, wantWrites int
	}{
		{"cached initialised: the initlock lock is not released", true, initlockLock, 6, 0},
		{"cached initialised: the upstream lock is not released", true, upstreamLock(true), 6, 0},
		{"cached dead UID: the initlock lock is not pointed at it", false, initlockLock, 4, 0},
		{"cached dead UID: the upstream lock is not pointed at it", false, upstreamLock(true), 4, 0},
		{"cached dead UID: an unowned upstream lock is adopted by the live UID", false, upstreamLock(false), 3, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t, b)
			old := f.cluster("c1")
			if tc.oldInitialized {
				f.setInitialized(old)
			}
			cached := old.DeepCopy()
			if err := f.c.Get(t.Context(), client.ObjectKeyFromObject(old), cached); err != nil {
				t.Fatal(err)
			}
			kubeenv.DeleteAndWait(t, f.c, old)
			live := f.cluster("c1")
			m1 := f.machine("c1", "m1")
			tc.lock(f, live, m1)
			before, err := f.lock()
			if err != nil {
				t.Fatal(err)
			}

			lc := newLaggingCache(t, f.c, f.ns)
			f.r.Client = staleClusters(lc.client(f.c), cached)
			f.counter.Reset()
			for range 2 {
				if _, err := f.r.Reconcile(t.Context(), f.request()); err != nil {
					t.Fatalf("Reconcile: %v", err)
				}
			}
			if got := lc.count(); got != tc.wantWrites {
				t.Errorf("writes = %d, want %d", got, tc.wantWrites)
			}
			if r := f.counter.Reads(); r != tc.wantReads {
				t.Errorf("reads = %d, want %d", r, tc.wantReads)
			}

			if !b.GarbageCollector {
				if err := lockStands(f, before, live); err != nil {
					t.Error(err)
				}
				return
			}
			// The garbage collector has had its chance: a ConfigMap owned
			// by the dead UID is collected; the lock is not.
			sentinel := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{
				Namespace: f.ns, Name: "owned-by-the-dead-cluster",
				OwnerReferences: []metav1.OwnerReference{{APIVersion: cached.GetAPIVersion(), Kind: "Cluster", Name: "c1", UID: cached.GetUID()}},
			}}
			f.create(sentinel)
			kubeenv.WaitGone(t, f.c, sentinel)
			kubeenv.Consistently(t, time.Second, func() error { return lockStands(f, before, live) })
		})
	}
}

// lockStands checks that the lock is the one created (same UID), still
// held by m1, and owned by the live Cluster's UID alone.
func lockStands(f *fixture, before *corev1.ConfigMap, live *unstructured.Unstructured) error {
	cm, err := kubeenv.GetLock(f.t.Context(), f.c, f.ns, "c1")
	switch {
	case err != nil:
		return err
	case cm == nil:
		return fmt.Errorf("the lock of the live Cluster %s was deleted", live.GetUID())
	case cm.UID != before.UID:
		return fmt.Errorf("the lock was deleted and created again: UID %s, was %s", cm.UID, before.UID)
	case cm.Data[wire.DataKey] != before.Data[wire.DataKey]:
		return fmt.Errorf("the lock's record changed: %s", cm.Data[wire.DataKey])
	}
	return kubeenv.LockOwnedBy(cm, live)
}

func initlockLock(f *fixture, c, m1 *unstructured.Unstructured) {
	f.t.Helper()
	res, err := initlock.New(f.c).Lock(f.t.Context(), c, m1)
	if err != nil || !res.Acquired {
		f.t.Fatalf("Lock(m1) = %+v, %v", res, err)
	}
}

// upstreamLock writes the lock as an upstream provider does: only
// lock-information and, when owned, an ownerReference by UID; no register.
func upstreamLock(owned bool) func(f *fixture, c, m1 *unstructured.Unstructured) {
	return func(f *fixture, c, _ *unstructured.Unstructured) {
		if owned {
			f.lockCM("c1", "m1", c, "")
			return
		}
		f.lockCM("c1", "m1", nil, "")
	}
}
