package locksuite

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	clocktesting "k8s.io/utils/clock/testing"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/initlock/initlock/internal/controllers/lock"
	"github.com/initlock/initlock/internal/kubeenv"
	"github.com/initlock/initlock/internal/kubeenv/wire"
	"github.com/initlock/initlock/pkg/initlock/capi"
	"github.com/initlock/initlock/pkg/initlock/keeper"
)

// Backend is an API server the cases run against.
type Backend struct {
	// New returns a client of a namespace of its own for t, the
	// namespace, and the counter of the client's requests.
	New func(t *testing.T) (c client.WithWatch, ns string, counter *kubeenv.Counter)
	// SetInitialized marks cluster's control plane initialized, as
	// kubeenv.SetInitialized does through the status subresource.
	SetInitialized func(ctx context.Context, c client.Client, cluster *unstructured.Unstructured) error
	// GarbageCollector tells that the backend runs the garbage collector.
	GarbageCollector bool
}

const (
	grace  = 10 * time.Minute
	settle = 30 * time.Second
)

// emitted is an event wantEvents expects: its type and reason.
type emitted struct{ eventtype, reason string }

// errNoLock is a check's error when the lock does not exist.
var errNoLock = errors.New("no lock")

// fixture is one test's namespace, a reconciler reading and writing the
// backend directly, and the count of its requests.
type fixture struct {
	t       *testing.T
	b       Backend
	ns      string
	c       client.WithWatch
	counter *kubeenv.Counter
	clock   *clocktesting.FakePassiveClock
	events  *kubeenv.Recorder
	r       *lock.Reconciler
	// stop cancels the context of the reconcile under way, when a case
	// sets it.
	stop context.CancelFunc
}

func newFixture(t *testing.T, b Backend) *fixture {
	t.Helper()
	c, ns, counter := b.New(t)
	f := &fixture{
		t:       t,
		b:       b,
		ns:      ns,
		c:       c,
		counter: counter,
		clock:   clocktesting.NewFakePassiveClock(time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)),
		events:  &kubeenv.Recorder{},
	}
	f.r = &lock.Reconciler{
		Client:      c,
		APIReader:   c,
		Recorder:    f.events,
		CAPIVersion: capi.V1Beta2,
		Policy:      keeper.Policy{ReleaseAfterInit: true, OrphanGrace: grace, OrphanSettle: settle},
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
		cm.Data[wire.DataKey] = record
	}
	f.create(cm)
	return cm
}

func (f *fixture) setInitialized(c *unstructured.Unstructured) {
	f.t.Helper()
	if err := f.b.SetInitialized(f.t.Context(), f.c, c); err != nil {
		f.t.Fatal(err)
	}
}

// request is the reconcile request of cluster c1.
func (f *fixture) request() ctrl.Request {
	return ctrl.Request{NamespacedName: types.NamespacedName{Namespace: f.ns, Name: "c1"}}
}

// reconcile runs one reconcile of cluster c1 and returns its result and
// the writes it made.
func (f *fixture) reconcile() (ctrl.Result, int) {
	f.t.Helper()
	f.counter.Reset()
	res, err := f.r.Reconcile(f.t.Context(), f.request())
	if err != nil {
		f.t.Fatalf("Reconcile %s/c1: %v", f.ns, err)
	}
	return res, f.counter.Writes()
}

// lock reads the lock of c1: errNoLock when there is none.
func (f *fixture) lock() (*corev1.ConfigMap, error) {
	cm, err := kubeenv.GetLock(f.t.Context(), f.c, f.ns, "c1")
	if cm == nil {
		return nil, cmp.Or(err, errNoLock)
	}
	return cm, nil
}

func (f *fixture) wantEvents(want ...emitted) {
	f.t.Helper()
	var got []emitted
	for _, e := range f.events.Events() {
		got = append(got, emitted{e.Type, e.Reason})
	}
	if !slices.Equal(got, want) {
		f.t.Errorf("events = %v, want %v", got, want)
	}
}

func ownedByCluster(f *fixture) error {
	cm, err := f.lock()
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
	cm, err := f.lock()
	if err != nil {
		return err
	}
	if len(cm.OwnerReferences) != 0 {
		return fmt.Errorf("lock of a paused Cluster was changed: %v", cm.OwnerReferences)
	}
	return nil
}

func hasRecord(want string) func(*fixture) error {
	return func(f *fixture) error {
		cm, err := f.lock()
		if err != nil {
			return err
		}
		if got := cm.Data[wire.DataKey]; got != want {
			return fmt.Errorf("record = %q, want %q", got, want)
		}
		return nil
	}
}
