package locksuite

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	"github.com/initlock/initlock/internal/kubeenv/wire"
	"github.com/initlock/initlock/pkg/initlock/capi"
)

// laggingCache makes c answer reads the way a manager's cache that never
// catches up would: a ConfigMap as it was when the cache was made (only
// those with the cluster-name label, as the manager's cache holds), and no
// Machine at all when hideMachines is set. Writes are counted, and answered
// with writeErr instead of being made when it is not nil.
type laggingCache struct {
	mu           sync.Mutex
	configMaps   map[types.NamespacedName]*corev1.ConfigMap
	hideMachines bool
	writeErr     error
	writes       int
}

func newLaggingCache(t *testing.T, c client.Client, ns string) *laggingCache {
	t.Helper()
	list := &corev1.ConfigMapList{}
	if err := c.List(t.Context(), list, client.InNamespace(ns), client.HasLabels{wire.ClusterNameLabel}); err != nil {
		t.Fatal(err)
	}
	lc := &laggingCache{configMaps: map[types.NamespacedName]*corev1.ConfigMap{}}
	for i := range list.Items {
		lc.configMaps[client.ObjectKeyFromObject(&list.Items[i])] = list.Items[i].DeepCopy()
	}
	return lc
}

// write counts a write and makes it with call, unless writeErr is set.
func (lc *laggingCache) write(call func() error) error {
	lc.mu.Lock()
	lc.writes++
	err := lc.writeErr
	lc.mu.Unlock()
	if err != nil {
		return err
	}
	return call()
}

func (lc *laggingCache) count() int {
	lc.mu.Lock()
	defer lc.mu.Unlock()
	return lc.writes
}

func (lc *laggingCache) client(c client.WithWatch) client.WithWatch {
	return interceptor.NewClient(c, interceptor.Funcs{
		Get: func(ctx context.Context, c client.WithWatch, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
			switch o := obj.(type) {
			case *corev1.ConfigMap:
				cm, ok := lc.configMaps[key]
				if !ok {
					return apierrors.NewNotFound(corev1.Resource("configmaps"), key.Name)
				}
				cm.DeepCopyInto(o)
				return nil
			case *metav1.PartialObjectMetadata:
				if lc.hideMachines && o.GroupVersionKind().Kind == "Machine" {
					return apierrors.NewNotFound(schema.GroupResource{Group: capi.Group, Resource: "machines"}, key.Name)
				}
			}
			return c.Get(ctx, key, obj, opts...)
		},
		Patch: func(ctx context.Context, c client.WithWatch, obj client.Object, patch client.Patch, opts ...client.PatchOption) error {
			return lc.write(func() error { return c.Patch(ctx, obj, patch, opts...) })
		},
		Delete: func(ctx context.Context, c client.WithWatch, obj client.Object, opts ...client.DeleteOption) error {
			return lc.write(func() error { return c.Delete(ctx, obj, opts...) })
		},
		Update: func(ctx context.Context, c client.WithWatch, obj client.Object, opts ...client.UpdateOption) error {
			return lc.write(func() error { return c.Update(ctx, obj, opts...) })
		},
		Create: func(ctx context.Context, c client.WithWatch, obj client.Object, opts ...client.CreateOption) error {
			return lc.write(func() error { return c.Create(ctx, obj, opts...) })
		},
	})
}

// markAbsent records on the lock cm that its Cluster has been absent
// since the given time, as the reconciler would have.
func (f *fixture) markAbsent(cm *corev1.ConfigMap, since time.Time) {
	f.t.Helper()
	before := cm.DeepCopy()
	cm.Annotations = map[string]string{wire.ClusterAbsentAnnotation: since.UTC().Format(time.RFC3339) + " " + string(cm.UID)}
	if err := f.c.Patch(f.t.Context(), cm, client.MergeFrom(before)); err != nil {
		f.t.Fatal(err)
	}
}

// Injected injects, with interceptor.Funcs around a client of the backend,
// what an API server does not produce on demand: API errors on writes,
// and a cache that lags the live reads.
func Injected(t *testing.T, b Backend) {
	conflict := apierrors.NewConflict(corev1.Resource("configmaps"), "c1-lock", errors.New("changed"))
	unownedLock := func(f *fixture) {
		f.cluster("c1")
		f.machine("c1", "m1")
		f.lockCM("c1", "m1", nil, "")
	}
	for _, tc := range []struct {
		name         string
		setUp        func(f *fixture)
		hideMachines bool
		writeErr     error
		// reconciles to run in a row; the cache is not updated in between.
		reconciles  int
		wantWrites  int
		wantRequeue time.Duration
		wantErr     bool
		wantEvents  []emitted
	}{
		{
			name:       "adopt once even when the cache lags",
			setUp:      unownedLock,
			reconciles: 3, wantWrites: 1, wantRequeue: 10 * time.Second,
			wantEvents: []emitted{{corev1.EventTypeNormal, "LockAdopted"}},
		},
		{
			name:       "conflict: look again soon, no error, no event",
			setUp:      unownedLock,
			writeErr:   conflict,
			reconciles: 1, wantWrites: 1, wantRequeue: time.Second,
		},
		{
			name:       "lock gone meanwhile: nothing to do",
			setUp:      unownedLock,
			writeErr:   apierrors.NewNotFound(corev1.Resource("configmaps"), "c1-lock"),
			reconciles: 1, wantWrites: 1,
		},
		{
			name:       "other API errors are returned",
			setUp:      unownedLock,
			writeErr:   apierrors.NewInternalError(errors.New("etcd unavailable")),
			reconciles: 1, wantWrites: 1, wantErr: true,
		},
		{
			name: "unlabelled ConfigMap, not in the cache, found by a live read",
			setUp: func(f *fixture) {
				f.cluster("c1")
				f.create(&corev1.ConfigMap{
					ObjectMeta: metav1.ObjectMeta{Namespace: f.ns, Name: "c1-lock"},
					Data:       map[string]string{wire.DataKey: `{"machineName":"m1"}`},
				})
			},
			reconciles: 2, wantWrites: 0, wantRequeue: 5 * time.Minute,
			wantEvents: []emitted{{corev1.EventTypeWarning, "ForeignConfigMap"}},
		},
		{
			name: "orphan past its grace: the cache misses the holder, a live read finds it",
			setUp: func(f *fixture) {
				f.machine("c1", "m1")
				f.markAbsent(f.lockCM("c1", "m1", nil, ""), f.clock.Now().Add(-time.Hour))
			},
			hideMachines: true,
			reconciles:   1, wantWrites: 0, wantRequeue: grace,
		},
		{
			name: "orphan past its grace, holder gone: collected once",
			setUp: func(f *fixture) {
				f.markAbsent(f.lockCM("c1", "m1", nil, ""), f.clock.Now().Add(-time.Hour))
			},
			reconciles: 2, wantWrites: 2, wantRequeue: 10 * time.Second,
			wantEvents: []emitted{{corev1.EventTypeNormal, "OrphanLockCollected"}},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t, b)
			tc.setUp(f)
			lc := newLaggingCache(t, f.c, f.ns)
			lc.hideMachines, lc.writeErr = tc.hideMachines, tc.writeErr
			f.r.Client = lc.client(f.c)

			var res ctrl.Result
			var err error
			for range tc.reconciles {
				res, err = f.r.Reconcile(t.Context(), f.request())
			}
			if (err != nil) != tc.wantErr {
				t.Fatalf("Reconcile error = %v, want error: %t", err, tc.wantErr)
			}
			if got := lc.count(); got != tc.wantWrites {
				t.Errorf("writes = %d, want %d", got, tc.wantWrites)
			}
			if res.RequeueAfter != tc.wantRequeue {
				t.Errorf("RequeueAfter = %s, want %s", res.RequeueAfter, tc.wantRequeue)
			}
			f.wantEvents(tc.wantEvents...)
		})
	}
}
