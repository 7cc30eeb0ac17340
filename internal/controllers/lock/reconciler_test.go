package lock

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	clocktesting "k8s.io/utils/clock/testing"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"
	"sigs.k8s.io/controller-runtime/pkg/event"

	"github.com/initlock/initlock/internal/capi"
	"github.com/initlock/initlock/pkg/initlock"
)

// These tests inject what a real API server does not produce on demand, API
// errors and a cache that lags the live reads, with the fake client. The
// behaviour itself is tested on the real API server in apiserver_test.go and
// internal/manager.

const ns = "default"

func scheme() *runtime.Scheme {
	s := runtime.NewScheme()
	utilruntime.Must(clientgoscheme.AddToScheme(s))
	for _, kind := range []string{capi.ClusterKind, capi.MachineKind} {
		gvk := schema.GroupVersionKind{Group: capi.Group, Version: capi.V1Beta2, Kind: kind}
		s.AddKnownTypeWithName(gvk, &unstructured.Unstructured{})
		s.AddKnownTypeWithName(gvk.GroupVersion().WithKind(kind+"List"), &unstructured.UnstructuredList{})
	}
	return s
}

func cluster(uid types.UID, mutate ...func(*unstructured.Unstructured)) *unstructured.Unstructured {
	u := &unstructured.Unstructured{}
	u.SetGroupVersionKind(capi.ClusterGVK(capi.V1Beta2))
	u.SetNamespace(ns)
	u.SetName("c1")
	u.SetUID(uid)
	for _, m := range mutate {
		m(u)
	}
	return u
}

func machine() *unstructured.Unstructured {
	u := &unstructured.Unstructured{}
	u.SetGroupVersionKind(capi.MachineGVK(capi.V1Beta2))
	u.SetNamespace(ns)
	u.SetName("m1")
	u.SetUID("machine-uid")
	u.SetLabels(map[string]string{capi.ClusterNameLabel: "c1"})
	return u
}

func lockCM(mutate ...func(*corev1.ConfigMap)) *corev1.ConfigMap {
	cm := &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{
			Namespace: ns, Name: "c1-lock", UID: "lock-uid", ResourceVersion: "10",
			Labels: map[string]string{initlock.ClusterNameLabel: "c1"},
		},
		Data: map[string]string{initlock.DataKey: `{"machineName":"m1"}`},
	}
	for _, m := range mutate {
		m(cm)
	}
	return cm
}

type recorded struct{ eventtype, reason string }

type fakeRecorder struct {
	mu     sync.Mutex
	events []recorded
}

func (f *fakeRecorder) Eventf(_, _ runtime.Object, eventtype, reason, _, _ string, _ ...any) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.events = append(f.events, recorded{eventtype, reason})
}

// writes counts the writes a fake client was asked to make, and answers
// them with err (nil: the write is made).
type writes struct {
	mu  sync.Mutex
	n   int
	err error
}

func (w *writes) funcs() interceptor.Funcs {
	count := func() error {
		w.mu.Lock()
		defer w.mu.Unlock()
		w.n++
		return w.err
	}
	return interceptor.Funcs{
		Patch: func(ctx context.Context, c client.WithWatch, obj client.Object, patch client.Patch, opts ...client.PatchOption) error {
			if err := count(); err != nil {
				return err
			}
			return c.Patch(ctx, obj, patch, opts...)
		},
		Delete: func(ctx context.Context, c client.WithWatch, obj client.Object, opts ...client.DeleteOption) error {
			if err := count(); err != nil {
				return err
			}
			return c.Delete(ctx, obj, opts...)
		},
		Update: func(ctx context.Context, c client.WithWatch, obj client.Object, opts ...client.UpdateOption) error {
			if err := count(); err != nil {
				return err
			}
			return c.Update(ctx, obj, opts...)
		},
		Create: func(ctx context.Context, c client.WithWatch, obj client.Object, opts ...client.CreateOption) error {
			if err := count(); err != nil {
				return err
			}
			return c.Create(ctx, obj, opts...)
		},
	}
}

func (w *writes) count() int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.n
}

func newReconciler(c, live client.Client, rec *fakeRecorder, now time.Time) *Reconciler {
	return &Reconciler{
		Client:       c,
		APIReader:    live,
		Recorder:     rec,
		CAPIVersion:  capi.V1Beta2,
		Policy:       initlock.Policy{ReleaseAfterInit: true, OrphanGrace: 10 * time.Minute},
		OrphanSettle: 30 * time.Second,
		Clock:        clocktesting.NewFakePassiveClock(now),
	}
}

var req = ctrl.Request{NamespacedName: types.NamespacedName{Namespace: ns, Name: "c1"}}

func TestReconcileInjected(t *testing.T) {
	now := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	absent := func(since time.Time) func(*corev1.ConfigMap) {
		return func(cm *corev1.ConfigMap) {
			cm.Annotations = map[string]string{initlock.ClusterAbsentAnnotation: since.Format(time.RFC3339) + " lock-uid"}
		}
	}
	for _, tc := range []struct {
		name string
		// cached objects, and objects only a live read sees.
		cached, live []client.Object
		writeErr     error
		// reconciles to run in a row, with the cache not updated in between
		// (a stale cache).
		reconciles  int
		wantWrites  int
		wantRequeue time.Duration
		wantErr     bool
		wantEvents  []recorded
	}{
		{
			name:       "adopt once even when the cache lags",
			cached:     []client.Object{cluster("new-uid"), machine(), lockCM()},
			reconciles: 3, wantWrites: 1, wantRequeue: cacheLagRetry,
			wantEvents: []recorded{{corev1.EventTypeNormal, ReasonLockAdopted}},
		},
		{
			name:       "conflict: look again soon, no error, no event",
			cached:     []client.Object{cluster("new-uid"), machine(), lockCM()},
			writeErr:   apierrors.NewConflict(schema.GroupResource{Resource: "configmaps"}, "c1-lock", fmt.Errorf("changed")),
			reconciles: 1, wantWrites: 1, wantRequeue: conflictRetry,
		},
		{
			name:       "lock gone meanwhile: nothing to do",
			cached:     []client.Object{cluster("new-uid"), machine(), lockCM()},
			writeErr:   apierrors.NewNotFound(schema.GroupResource{Resource: "configmaps"}, "c1-lock"),
			reconciles: 1, wantWrites: 1,
		},
		{
			name:       "other API errors are returned",
			cached:     []client.Object{cluster("new-uid"), machine(), lockCM()},
			writeErr:   apierrors.NewInternalError(fmt.Errorf("etcd unavailable")),
			reconciles: 1, wantWrites: 1, wantErr: true,
		},
		{
			name:       "unlabelled ConfigMap found by a live read",
			cached:     []client.Object{cluster("new-uid")},
			live:       []client.Object{cluster("new-uid"), lockCM(func(cm *corev1.ConfigMap) { cm.Labels = nil })},
			reconciles: 2, wantWrites: 0, wantRequeue: foreignRecheck,
			wantEvents: []recorded{{corev1.EventTypeWarning, ReasonForeignConfigMap}},
		},
		{
			name:       "orphan past its grace: the cache misses the holder, a live read finds it",
			cached:     []client.Object{lockCM(absent(now.Add(-time.Hour)))},
			live:       []client.Object{machine(), lockCM(absent(now.Add(-time.Hour)))},
			reconciles: 1, wantWrites: 0, wantRequeue: 10 * time.Minute,
		},
		{
			name:       "orphan past its grace, holder gone: collected once",
			cached:     []client.Object{lockCM(absent(now.Add(-time.Hour)))},
			reconciles: 2, wantWrites: 1, wantRequeue: cacheLagRetry,
			wantEvents: []recorded{{corev1.EventTypeNormal, ReasonOrphanLockCollected}},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			w := &writes{err: tc.writeErr}
			s := scheme()
			stale := map[string]*corev1.ConfigMap{}
			for _, o := range tc.cached {
				if cm, ok := o.(*corev1.ConfigMap); ok {
					stale[cm.Name] = cm.DeepCopy()
				}
			}
			underlying := fake.NewClientBuilder().WithScheme(s).WithObjects(tc.cached...).Build()
			funcs := w.funcs()
			// The cache never catches up: it answers the ConfigMaps it held
			// at the start, whatever was written since.
			funcs.Get = func(ctx context.Context, c client.WithWatch, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
				if cm, ok := obj.(*corev1.ConfigMap); ok && stale[key.Name] != nil {
					stale[key.Name].DeepCopyInto(cm)
					return nil
				}
				return c.Get(ctx, key, obj, opts...)
			}
			cached := interceptor.NewClient(underlying, funcs)
			live := fake.NewClientBuilder().WithScheme(s).WithObjects(tc.live...).Build()
			rec := &fakeRecorder{}
			r := newReconciler(cached, live, rec, now)

			var res ctrl.Result
			var err error
			for range tc.reconciles {
				res, err = r.Reconcile(t.Context(), req)
			}
			if (err != nil) != tc.wantErr {
				t.Fatalf("Reconcile error = %v, want error: %t", err, tc.wantErr)
			}
			if got := w.count(); got != tc.wantWrites {
				t.Errorf("writes = %d, want %d", got, tc.wantWrites)
			}
			if res.RequeueAfter != tc.wantRequeue {
				t.Errorf("RequeueAfter = %s, want %s", res.RequeueAfter, tc.wantRequeue)
			}
			if fmt.Sprint(rec.events) != fmt.Sprint(tc.wantEvents) {
				t.Errorf("events = %v, want %v", rec.events, tc.wantEvents)
			}
		})
	}
}

func TestLockToClusters(t *testing.T) {
	for _, tc := range []struct {
		name   string
		labels map[string]string
		cmName string
		want   []string
	}{
		{"lock", map[string]string{initlock.ClusterNameLabel: "c1"}, "c1-lock", []string{"c1"}},
		{"labelled for another cluster", map[string]string{initlock.ClusterNameLabel: "c2"}, "c1-lock", []string{"c2", "c1"}},
		{"other labelled ConfigMap", map[string]string{initlock.ClusterNameLabel: "c1"}, "c1-kubeconfig", []string{"c1"}},
		{"bare suffix", nil, "-lock", nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: tc.cmName, Labels: tc.labels}}
			var got []string
			for _, r := range lockToClusters(t.Context(), cm) {
				if r.Namespace != ns {
					t.Errorf("namespace %q", r.Namespace)
				}
				got = append(got, r.Name)
			}
			if fmt.Sprint(got) != fmt.Sprint(tc.want) {
				t.Errorf("requests %v, want %v", got, tc.want)
			}
		})
	}
}

func TestClusterChanged(t *testing.T) {
	base := func() *unstructured.Unstructured {
		u := cluster("uid")
		u.SetResourceVersion("1")
		return u
	}
	p := clusterChanged()
	for _, tc := range []struct {
		name   string
		mutate func(*unstructured.Unstructured)
		want   bool
	}{
		{"resync", func(*unstructured.Unstructured) {}, true},
		{"status churn", func(u *unstructured.Unstructured) {
			u.SetResourceVersion("2")
			u.Object["status"] = map[string]any{"phase": "Provisioning"}
		}, false},
		{"paused", func(u *unstructured.Unstructured) {
			u.SetResourceVersion("2")
			u.SetAnnotations(map[string]string{capi.PausedAnnotation: "true"})
		}, true},
		{"initialised", func(u *unstructured.Unstructured) {
			u.SetResourceVersion("2")
			u.Object["status"] = map[string]any{"initialization": map[string]any{"controlPlaneInitialized": true}}
		}, true},
		{"deleting", func(u *unstructured.Unstructured) {
			u.SetResourceVersion("2")
			u.SetDeletionTimestamp(&metav1.Time{Time: time.Now()})
		}, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			updated := base()
			tc.mutate(updated)
			if got := p.Update(event.UpdateEvent{ObjectOld: base(), ObjectNew: updated}); got != tc.want {
				t.Errorf("Update = %t, want %t", got, tc.want)
			}
		})
	}
}
