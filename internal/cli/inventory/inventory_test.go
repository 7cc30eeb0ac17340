package inventory_test

import (
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/initlock/initlock/internal/cli/inventory"
	"github.com/initlock/initlock/internal/kubeenv"
	"github.com/initlock/initlock/pkg/initlock"
	"github.com/initlock/initlock/pkg/initlock/capi"
	"github.com/initlock/initlock/pkg/initlock/engine"
)

// This package runs on a management cluster that serves only v1beta1, as
// older ones do; the command tests run on v1beta2.
var env *kubeenv.Env

func TestMain(m *testing.M) {
	kubeenv.Main(m, kubeenv.Options{CAPI: kubeenv.CAPIV1Beta1, NoControllerManager: true}, &env)
}

func newCluster(t *testing.T, ns, name string, initialised bool) *unstructured.Unstructured {
	t.Helper()
	u := kubeenv.NewCluster(capi.V1Beta1, ns, name)
	if err := env.Client.Create(t.Context(), u); err != nil {
		t.Fatal(err)
	}
	if initialised {
		if err := kubeenv.SetInitialized(t.Context(), env.Client, u); err != nil {
			t.Fatal(err)
		}
	}
	return u
}

func newLock(t *testing.T, ns, cluster, holder string, owner *unstructured.Unstructured) {
	t.Helper()
	if err := env.Client.Create(t.Context(), kubeenv.NewLock(ns, cluster, holder, owner)); err != nil {
		t.Fatal(err)
	}
}

func TestGatherOnV1Beta1(t *testing.T) {
	ctx := t.Context()
	version, err := capi.Discover(env.Discovery(t))
	if err != nil || version != capi.V1Beta1 {
		t.Fatalf("Discover = %q, %v", version, err)
	}
	ns := env.Namespace(t)
	healthy := newCluster(t, ns, "c-healthy", false)
	if err := env.Client.Create(ctx, kubeenv.NewMachine(capi.V1Beta1, ns, "c-healthy", "m1")); err != nil {
		t.Fatal(err)
	}
	newLock(t, ns, "c-healthy", "m1", healthy)
	initialised := newCluster(t, ns, "c-init", true)
	newLock(t, ns, "c-init", "m-gone", initialised)
	newCluster(t, ns, "c-foreign", false)
	if err := env.Client.Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "c-foreign-lock"}}); err != nil {
		t.Fatal(err)
	}
	// Labelled for a cluster but not named as its lock: not a lock.
	if err := env.Client.Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "c-healthy-settings",
		Labels: map[string]string{engine.ClusterNameLabel: "c-healthy"}}}); err != nil {
		t.Fatal(err)
	}

	var c kubeenv.Counter
	cl, err := client.New(c.CountingConfig(env.Config), client.Options{Scheme: env.Client.Scheme()})
	if err != nil {
		t.Fatal(err)
	}
	// A page size of 1 makes every list take several pages.
	inv, err := inventory.Gather(ctx, cl, inventory.Options{Namespace: ns, CAPIVersion: version, PageSize: 1})
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]initlock.Verdict{}
	for _, e := range inv.Entries {
		got[e.ClusterName] = engine.Decide(e.Observation, engine.DefaultPolicy, time.Now()).Verdict
	}
	want := map[string]initlock.Verdict{
		"c-foreign": engine.VerdictForeign,
		"c-healthy": engine.VerdictHealthy,
		"c-init":    engine.VerdictHeldAfterInit,
	}
	if len(got) != len(want) {
		t.Errorf("entries %v, want %v", got, want)
	}
	for k, v := range want {
		if got[k] != v {
			t.Errorf("%s: %q, want %q", k, got[k], v)
		}
	}
	if c.Writes() != 0 {
		t.Errorf("Gather wrote %d times", c.Writes())
	}

	e, err := inventory.Observe(ctx, cl, version, ns, "c-healthy")
	if err != nil {
		t.Fatal(err)
	}
	if e.Observation.Holder == nil || e.Observation.Holder.APIVersion != "cluster.x-k8s.io/v1beta1" || e.ConfigMap == nil {
		t.Errorf("Observe: %+v", e.Observation)
	}
}
