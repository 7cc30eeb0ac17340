// Package managertest helps tests and benchmarks run the initlock manager
// in-process against a real API server: Start builds it with the options a
// test wants and runs it with kubeenv's StartManager, which counts its
// requests (kubeenv.Counter: exact counts by verb, resource, namespace and
// status, and the requests refused by authorisation); plus helpers to create
// Clusters and Machines, to restore a Cluster's lock with kubeenv's Velero
// simulator and to wait for events.
//
// It is test support: it calls t.Fatal on unexpected errors and guarantees
// nothing about production use.
package managertest

import (
	"fmt"
	"testing"
	"time"

	eventsv1 "k8s.io/api/events/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/rest"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/initlock/initlock/internal/kubeenv"
	"github.com/initlock/initlock/internal/kubeenv/velerosim"
	"github.com/initlock/initlock/internal/manager"
)

// Options are the options of a manager started by a test: one namespace
// (all when empty), no servers, no leader election, the rest.Config's rate
// limits.
func Options(namespace string) manager.Options {
	o := manager.DefaultOptions()
	o.Namespace = namespace
	o.MetricsBindAddress = "0"
	o.HealthProbeBindAddress = "0"
	o.KubeAPIQPS, o.KubeAPIBurst = 0, 0 // keep the Env's
	return o
}

// Start builds a manager for cfg with opts, counting its requests, starts
// it, waits (a minute at most) for its cache to sync and stops it when t
// ends.
func Start(t testing.TB, cfg *rest.Config, opts manager.Options) *kubeenv.Running {
	t.Helper()
	rm := StartNoWait(t, cfg, opts)
	rm.WaitForCacheSync(t)
	return rm
}

// StartNoWait is Start without waiting for the cache.
func StartNoWait(t testing.TB, cfg *rest.Config, opts manager.Options) *kubeenv.Running {
	t.Helper()
	return kubeenv.StartManager(t, cfg, func(cfg *rest.Config) (ctrl.Manager, error) { return manager.New(cfg, opts) })
}

// CreateCluster creates a Cluster of the given version, changed by mutate
// first.
func CreateCluster(t testing.TB, c client.Client, version, ns, name string, mutate ...func(*unstructured.Unstructured)) *unstructured.Unstructured {
	t.Helper()
	u := kubeenv.NewCluster(version, ns, name)
	for _, m := range mutate {
		m(u)
	}
	if err := c.Create(t.Context(), u); err != nil {
		t.Fatalf("creating cluster %s/%s: %v", ns, name, err)
	}
	return u
}

// CreateMachine creates a control-plane Machine of cluster.
func CreateMachine(t testing.TB, c client.Client, version, ns, cluster, name string) *unstructured.Unstructured {
	t.Helper()
	u := kubeenv.NewMachine(version, ns, cluster, name)
	if err := c.Create(t.Context(), u); err != nil {
		t.Fatalf("creating machine %s/%s: %v", ns, name, err)
	}
	return u
}

// Create creates obj.
func Create(t testing.TB, c client.Client, obj client.Object) {
	t.Helper()
	if err := c.Create(t.Context(), obj); err != nil {
		t.Fatalf("creating %T %s/%s: %v", obj, obj.GetNamespace(), obj.GetName(), err)
	}
}

// RestoreAndExpectAdoption restores into env, with kubeenv's Velero
// simulator, the lock of a Cluster named cluster held by cluster+"-cp-0"
// without ownerReferences, that Machine and the Cluster, then waits a
// minute at most for a running manager to make the Cluster own the lock.
// It returns the Cluster.
func RestoreAndExpectAdoption(t testing.TB, env *kubeenv.Env, version, ns, cluster string) *unstructured.Unstructured {
	t.Helper()
	holder := cluster + "-cp-0"
	var cl *unstructured.Unstructured
	for _, u := range velerosim.Restore[client.Object](t, env.Config, velerosim.Options{}, kubeenv.NewLock(ns, cluster, holder, nil),
		kubeenv.NewMachine(version, ns, cluster, holder), kubeenv.NewCluster(version, ns, cluster)) {
		if u.GetKind() == "Cluster" {
			cl = u
		}
	}
	kubeenv.Eventually(t, 60*time.Second, func() error {
		cm, err := kubeenv.GetLock(t.Context(), env.Client, ns, cluster)
		if err != nil {
			return err
		}
		return kubeenv.LockOwnedBy(cm, cl)
	})
	return cl
}

// Events returns the events.k8s.io Events in ns with the given reason.
func Events(t testing.TB, c client.Client, ns, reason string) []eventsv1.Event {
	t.Helper()
	var list eventsv1.EventList
	if err := c.List(t.Context(), &list, client.InNamespace(ns)); err != nil {
		t.Fatalf("listing events: %v", err)
	}
	var out []eventsv1.Event
	for _, e := range list.Items {
		if e.Reason == reason {
			out = append(out, e)
		}
	}
	return out
}

// EventOn waits for an event with reason regarding the named object of the
// given kind.
func EventOn(t testing.TB, c client.Client, ns, reason, kind, name string) eventsv1.Event {
	t.Helper()
	var found eventsv1.Event
	kubeenv.Eventually(t, 20*time.Second, func() error {
		for _, e := range Events(t, c, ns, reason) {
			if e.Regarding.Kind == kind && e.Regarding.Name == name {
				found = e
				return nil
			}
		}
		return fmt.Errorf("no %s event on %s %s", reason, kind, name)
	})
	return found
}
