package lock

import (
	"cmp"
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	clocktesting "k8s.io/utils/clock/testing"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/initlock/initlock/internal/kubeenv"
	"github.com/initlock/initlock/pkg/initlock/capi"
	"github.com/initlock/initlock/pkg/initlock/engine"
)

// These tests call Reconcile directly against the real API server, with an
// injected clock, so that time-driven behaviour (the orphan settle time and
// grace period) is exercised without waiting. The manager as a whole, with
// its cache and watches, is tested in internal/manager; reconciler_test.go
// injects errors and cache lag.

var env *kubeenv.Env

func TestMain(m *testing.M) {
	kubeenv.Main(m, kubeenv.Options{CAPI: kubeenv.CAPIV1Beta2, LockGuard: true}, &env)
}

const (
	grace  = 10 * time.Minute
	settle = 30 * time.Second
)

type emitted struct{ eventtype, reason string }

// recorder records the events the reconciler emits.
type recorder struct {
	mu  sync.Mutex
	got []emitted
}

var _ EventRecorder = (*recorder)(nil)

func (e *recorder) Eventf(_, _ runtime.Object, eventtype, reason, _, _ string, _ ...any) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.got = append(e.got, emitted{eventtype, reason})
}

func (e *recorder) list() []emitted {
	e.mu.Lock()
	defer e.mu.Unlock()
	return slices.Clone(e.got)
}

// errNoLock is a check's error when the lock does not exist.
var errNoLock = errors.New("no lock")

// fixture is one test's namespace, a reconciler reading and writing the API
// server directly, and the count of its requests.
type fixture struct {
	t       *testing.T
	ns      string
	c       client.WithWatch
	counter *kubeenv.Counter
	clock   *clocktesting.FakePassiveClock
	events  *recorder
	r       *Reconciler
}

func newFixture(t *testing.T) *fixture {
	t.Helper()
	counter := &kubeenv.Counter{}
	c, err := client.NewWithWatch(counter.CountingConfig(env.Config), client.Options{Scheme: kubeenv.Scheme()})
	if err != nil {
		t.Fatal(err)
	}
	f := &fixture{
		t:       t,
		ns:      env.Namespace(t),
		c:       c,
		counter: counter,
		clock:   clocktesting.NewFakePassiveClock(time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)),
		events:  &recorder{},
	}
	f.r = &Reconciler{
		Client:      c,
		APIReader:   c,
		Recorder:    f.events,
		CAPIVersion: capi.V1Beta2,
		Policy:      engine.Policy{ReleaseAfterInit: true, OrphanGrace: grace, OrphanSettle: settle},
		Clock:       f.clock,
	}
	return f
}

func (f *fixture) create(obj client.Object) {
	f.t.Helper()
	if err := f.c.Create(f.t.Context(), obj); err != nil {
		f.t.Fatalf("creating %s %s: %v", obj.GetObjectKind().GroupVersionKind().Kind, obj.GetName(), err)
	}
}

func (f *fixture) cluster(name string, mutate ...func(*unstructured.Unstructured)) *unstructured.Unstructured {
	f.t.Helper()
	u := kubeenv.NewCluster(capi.V1Beta2, f.ns, name)
	for _, m := range mutate {
		m(u)
	}
	f.create(u)
	return u
}

func (f *fixture) machine(cluster, name string) *unstructured.Unstructured {
	f.t.Helper()
	u := kubeenv.NewMachine(capi.V1Beta2, f.ns, cluster, name)
	f.create(u)
	return u
}

// lockCM creates the lock of cluster held by machine, owned by owner when it
// is not nil, with the given record in place of a valid one when not empty.
func (f *fixture) lockCM(cluster, machine string, owner *unstructured.Unstructured, record string) *corev1.ConfigMap {
	f.t.Helper()
	cm := kubeenv.NewLock(f.ns, cluster, machine, owner)
	if record != "" {
		cm.Data[engine.DataKey] = record
	}
	f.create(cm)
	return cm
}

// reconcile runs one reconcile of cluster and returns its result and the
// writes it made.
func (f *fixture) reconcile(cluster string) (ctrl.Result, int) {
	f.t.Helper()
	f.counter.Reset()
	res, err := f.r.Reconcile(f.t.Context(), ctrl.Request{NamespacedName: types.NamespacedName{Namespace: f.ns, Name: cluster}})
	if err != nil {
		f.t.Fatalf("Reconcile %s/%s: %v", f.ns, cluster, err)
	}
	return res, f.counter.Writes()
}

func (f *fixture) wantEvents(want ...emitted) {
	f.t.Helper()
	if got := f.events.list(); !slices.Equal(got, want) {
		f.t.Errorf("events = %v, want %v", got, want)
	}
}

// step is one reconcile and what it must do.
type step struct {
	advance     time.Duration
	wantWrites  int
	wantRequeue time.Duration
}

func TestReconcileOnAPIServer(t *testing.T) {
	paused := func(u *unstructured.Unstructured) {
		u.SetAnnotations(map[string]string{capi.PausedAnnotation: ""})
	}
	for _, tc := range []struct {
		name string
		// set up creates the objects of cluster "c1".
		setUp func(f *fixture)
		steps []step
		// check looks at the lock after the last step.
		check      func(f *fixture) error
		wantEvents []emitted
	}{
		{
			name: "healthy: no write",
			setUp: func(f *fixture) {
				c := f.cluster("c1")
				f.machine("c1", "m1")
				f.lockCM("c1", "m1", c, "")
			},
			steps: []step{{}, {}},
		},
		{
			name: "unowned: adopted with one write, then healthy",
			setUp: func(f *fixture) {
				f.cluster("c1")
				f.machine("c1", "m1")
				f.lockCM("c1", "m1", nil, "")
			},
			steps:      []step{{wantWrites: 1}, {}},
			check:      ownedByCluster,
			wantEvents: []emitted{{corev1.EventTypeNormal, ReasonLockAdopted}},
		},
		{
			name: "initialised: released with two writes",
			setUp: func(f *fixture) {
				c := f.cluster("c1")
				f.machine("c1", "m1")
				f.lockCM("c1", "m1", c, "")
				if err := kubeenv.SetInitialized(f.t.Context(), f.c, c); err != nil {
					f.t.Fatal(err)
				}
			},
			steps: []step{{wantWrites: 2}, {}}, // the release mark, the delete
			check: func(f *fixture) error {
				cm, err := kubeenv.GetLock(f.t.Context(), f.c, f.ns, "c1")
				if cm != nil {
					return fmt.Errorf("lock of an initialised Cluster still exists")
				}
				return err
			},
			wantEvents: []emitted{{corev1.EventTypeNormal, ReasonLockReleased}},
		},
		{
			name: "paused by annotation: no write, no event, even for a corrupt lock",
			setUp: func(f *fixture) {
				f.cluster("c1", paused)
				f.lockCM("c1", "m1", nil, "garbage")
			},
			steps: []step{{}, {}},
			check: unowned,
		},
		{
			name: "paused by spec: an unowned lock is left unowned",
			setUp: func(f *fixture) {
				f.cluster("c1", kubeenv.Paused)
				f.machine("c1", "m1")
				f.lockCM("c1", "m1", nil, "")
			},
			steps: []step{{}, {}},
			check: unowned,
		},
		{
			name: "corrupt: one warning for the same resourceVersion, no write",
			setUp: func(f *fixture) {
				c := f.cluster("c1")
				f.lockCM("c1", "m1", c, "garbage")
			},
			steps:      []step{{}, {}, {}},
			check:      hasRecord("garbage"),
			wantEvents: []emitted{{corev1.EventTypeWarning, ReasonCorruptLock}},
		},
		{
			name: "ConfigMap with the lock's name but no label: warned about, left alone",
			setUp: func(f *fixture) {
				f.cluster("c1")
				cm := &corev1.ConfigMap{
					ObjectMeta: metav1.ObjectMeta{Namespace: f.ns, Name: "c1-lock"},
					Data:       map[string]string{"user-data": "keep me"},
				}
				f.create(cm)
			},
			// Reads go straight to the API server here, so the ConfigMap is
			// found without the live fallback the manager's label-filtered
			// cache needs (and its periodic recheck): see TestReconcileInjected
			// and internal/manager's TestNotALock.
			steps: []step{{}, {}},
			check: func(f *fixture) error {
				cm, err := kubeenv.GetLock(f.t.Context(), f.c, f.ns, "c1")
				if cm == nil {
					return cmp.Or(err, errNoLock)
				}
				if cm.Data["user-data"] != "keep me" || len(cm.OwnerReferences) != 0 || len(cm.Annotations) != 0 {
					return fmt.Errorf("foreign ConfigMap changed: %+v", cm)
				}
				return nil
			},
			wantEvents: []emitted{{corev1.EventTypeWarning, ReasonForeignConfigMap}},
		},
		{
			name: "orphan: recorded after the settle time, kept while its holder exists",
			setUp: func(f *fixture) {
				f.machine("c1", "m1")
				f.lockCM("c1", "m1", nil, "")
			},
			steps: []step{
				// First seen without its Cluster: wait for the settle time.
				{wantRequeue: settle},
				{advance: settle / 2, wantRequeue: settle / 2},
				// Settled: the absence is recorded on the lock, from the
				// first sight.
				{advance: settle / 2, wantWrites: 1, wantRequeue: grace - settle},
				// Past the grace period, the holder still exists.
				{advance: grace + time.Second, wantRequeue: grace},
			},
			check: func(f *fixture) error {
				cm, err := kubeenv.GetLock(f.t.Context(), f.c, f.ns, "c1")
				if cm == nil {
					return cmp.Or(err, errNoLock)
				}
				mark, ok := cm.Annotations[engine.ClusterAbsentAnnotation]
				if !ok {
					return fmt.Errorf("absence not recorded on the lock: %v", cm.Annotations)
				}
				if want := "2026-12-01T12:00:00Z " + string(cm.UID); mark != want {
					return fmt.Errorf("absence recorded as %q, want the first sight %q", mark, want)
				}
				return nil
			},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t)
			tc.setUp(f)
			for i, s := range tc.steps {
				f.clock.SetTime(f.clock.Now().Add(s.advance))
				res, writes := f.reconcile("c1")
				if writes != s.wantWrites {
					t.Errorf("step %d: %d writes, want %d", i, writes, s.wantWrites)
				}
				if res.RequeueAfter != s.wantRequeue {
					t.Errorf("step %d: RequeueAfter = %s, want %s", i, res.RequeueAfter, s.wantRequeue)
				}
			}
			if tc.check != nil {
				if err := tc.check(f); err != nil {
					t.Error(err)
				}
			}
			f.wantEvents(tc.wantEvents...)
		})
	}
}

// TestOrphanCollectedAfterHolderGone follows an orphan lock to its end: the
// holder Machine is deleted after the grace period, and the lock is deleted
// with two writes (the release mark, the delete) and one event.
func TestOrphanCollectedAfterHolderGone(t *testing.T) {
	f := newFixture(t)
	m := f.machine("c1", "m1")
	f.lockCM("c1", "m1", nil, "")
	for _, advance := range []time.Duration{0, settle, grace + time.Second} {
		f.clock.SetTime(f.clock.Now().Add(advance))
		f.reconcile("c1")
	}
	if cm, err := kubeenv.GetLock(t.Context(), f.c, f.ns, "c1"); cm == nil {
		t.Fatalf("lock collected while its holder exists (%v)", err)
	}
	kubeenv.DeleteAndWait(t, f.c, m)

	if _, writes := f.reconcile("c1"); writes != 2 {
		t.Errorf("collecting: %d writes, want 2 (the release mark, the delete)", writes)
	}
	if cm, err := kubeenv.GetLock(t.Context(), f.c, f.ns, "c1"); cm != nil || err != nil {
		t.Errorf("lock after collection: %v, %v, want none", cm, err)
	}
	if _, writes := f.reconcile("c1"); writes != 0 {
		t.Errorf("after collection: %d writes, want 0", writes)
	}
	f.wantEvents(emitted{corev1.EventTypeNormal, ReasonOrphanLockCollected})
}

func ownedByCluster(f *fixture) error {
	cm, err := kubeenv.GetLock(f.t.Context(), f.c, f.ns, "c1")
	if err != nil {
		return err
	}
	c := &unstructured.Unstructured{}
	c.SetGroupVersionKind(capi.ClusterGVK(capi.V1Beta2))
	if err := f.c.Get(f.t.Context(), types.NamespacedName{Namespace: f.ns, Name: "c1"}, c); err != nil {
		return err
	}
	return kubeenv.LockOwnedBy(cm, c)
}

func unowned(f *fixture) error {
	cm, err := kubeenv.GetLock(f.t.Context(), f.c, f.ns, "c1")
	if cm == nil {
		return cmp.Or(err, errNoLock)
	}
	if len(cm.OwnerReferences) != 0 {
		return fmt.Errorf("lock of a paused Cluster was changed: %v", cm.OwnerReferences)
	}
	return nil
}

func hasRecord(want string) func(*fixture) error {
	return func(f *fixture) error {
		cm, err := kubeenv.GetLock(f.t.Context(), f.c, f.ns, "c1")
		if cm == nil {
			return cmp.Or(err, errNoLock)
		}
		if got := cm.Data[engine.DataKey]; got != want {
			return fmt.Errorf("record = %q, want %q", got, want)
		}
		return nil
	}
}
