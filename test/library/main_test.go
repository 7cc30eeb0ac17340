package library_test

import (
	"context"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/initlock/initlock/internal/kubeenv"
	"github.com/initlock/initlock/internal/kubeenv/wire"
	"github.com/initlock/initlock/pkg/initlock"
	"github.com/initlock/initlock/pkg/initlock/capi"
	"github.com/initlock/initlock/pkg/initlock/initlocktest"
)

var env *kubeenv.Env

func TestMain(m *testing.M) { kubeenv.Main(m, kubeenv.Options{}, &env) }

// fixture is one namespace with a Cluster and helpers around it.
type fixture struct {
	t       testing.TB
	ns      string
	cluster *unstructured.Unstructured
	counter *kubeenv.Counter
	// client counts its requests in counter.
	client client.Client
	locker *initlock.Locker
	// admin sets up and inspects what the test needs, uncounted.
	admin client.Client
	// fake tells that the objects are in a fake client (newFakeFixture),
	// which counts no request.
	fake bool
}

func newFixture(t testing.TB) *fixture {
	t.Helper()
	f := &fixture{t: t, ns: env.Namespace(t), counter: &kubeenv.Counter{}, admin: env.Client}
	var err error
	f.client, err = client.New(f.counter.CountingConfig(env.Config), client.Options{Scheme: kubeenv.Scheme()})
	if err != nil {
		t.Fatal(err)
	}
	f.locker = initlock.New(f.client)
	f.cluster = f.create(kubeenv.NewCluster(capi.V1Beta2, f.ns, "c1"))
	f.counter.Reset()
	return f
}

// newFakeFixture is a fixture whose objects are in controller-runtime's
// fake client, set up by package initlocktest as a provider's unit tests
// set it up, instead of the API server.
func newFakeFixture(t testing.TB) *fixture {
	t.Helper()
	c := initlocktest.NewClientBuilder().WithScheme(kubeenv.Scheme()).Build()
	f := &fixture{t: t, ns: "fake", counter: &kubeenv.Counter{}, client: c, locker: initlock.New(c), admin: c, fake: true}
	f.cluster = f.create(kubeenv.NewCluster(capi.V1Beta2, f.ns, "c1"))
	return f
}

func (f *fixture) ctx() context.Context {
	if t, ok := f.t.(*testing.T); ok {
		return t.Context()
	}
	return f.t.(*testing.B).Context()
}

func (f *fixture) create(u *unstructured.Unstructured) *unstructured.Unstructured {
	f.t.Helper()
	if err := f.admin.Create(f.ctx(), u); err != nil {
		f.t.Fatalf("creating %s %s: %v", u.GetKind(), u.GetName(), err)
	}
	return u
}

func (f *fixture) machine(name string) *unstructured.Unstructured {
	f.t.Helper()
	return f.create(kubeenv.NewMachine(capi.V1Beta2, f.ns, f.cluster.GetName(), name))
}

// get reads an object again, live.
func (f *fixture) get(u *unstructured.Unstructured) *unstructured.Unstructured {
	f.t.Helper()
	out := &unstructured.Unstructured{}
	out.SetGroupVersionKind(u.GroupVersionKind())
	if err := f.admin.Get(f.ctx(), client.ObjectKeyFromObject(u), out); err != nil {
		f.t.Fatalf("reading %s %s: %v", u.GetKind(), u.GetName(), err)
	}
	return out
}

func (f *fixture) lockCM() *corev1.ConfigMap {
	f.t.Helper()
	cm := &corev1.ConfigMap{}
	err := f.admin.Get(f.ctx(), client.ObjectKey{Namespace: f.ns, Name: f.cluster.GetName() + "-lock"}, cm)
	if err != nil {
		f.t.Fatalf("reading the lock: %v", err)
	}
	return cm
}

func (f *fixture) lockHolder() string {
	f.t.Helper()
	r, err := wire.DecodeRecord(f.lockCM().Data[wire.DataKey])
	if err != nil {
		f.t.Fatal(err)
	}
	return r.MachineName
}

func (f *fixture) mustLock(m *unstructured.Unstructured) initlock.Result {
	f.t.Helper()
	res, err := f.locker.Lock(f.ctx(), f.cluster, m)
	if err != nil {
		f.t.Fatalf("Lock(%s): %v", m.GetName(), err)
	}
	return res
}

// upstreamLock writes a lock exactly as the upstream providers do.
func (f *fixture) upstreamLock(machine string, owners ...metav1.OwnerReference) *corev1.ConfigMap {
	f.t.Helper()
	cm := kubeenv.NewLock(f.ns, f.cluster.GetName(), machine, nil)
	cm.OwnerReferences = owners
	if err := f.admin.Create(f.ctx(), cm); err != nil {
		f.t.Fatal(err)
	}
	return cm
}

func (f *fixture) clusterRef() metav1.OwnerReference {
	return metav1.OwnerReference{APIVersion: f.cluster.GetAPIVersion(), Kind: "Cluster", Name: f.cluster.GetName(), UID: f.cluster.GetUID()}
}
