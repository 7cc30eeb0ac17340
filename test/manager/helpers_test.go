package managersuite_test

import (
	"cmp"
	"fmt"
	"testing"

	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/initlock/initlock/internal/kubeenv"
	"github.com/initlock/initlock/internal/kubeenv/wire"
	"github.com/initlock/initlock/test/managertest"
)

// Shorthands for the kubeenv and managertest helpers with this package's Env.

var (
	testOptions  = managertest.Options
	startManager = managertest.Start
	lockFor      = kubeenv.NewLock
	paused       = kubeenv.Paused
	metricValue  = managertest.MetricValue
	wantWrites   = managertest.WantWrites
	noWrites     = managertest.NoWrites
)

func createCluster(t testing.TB, version, ns, name string, mutate ...func(*unstructured.Unstructured)) *unstructured.Unstructured {
	t.Helper()
	return managertest.CreateCluster(t, env.Client, version, ns, name, mutate...)
}

func createMachine(t testing.TB, version, ns, cluster, name string) *unstructured.Unstructured {
	t.Helper()
	return managertest.CreateMachine(t, env.Client, version, ns, cluster, name)
}

func create(t testing.TB, objs ...client.Object) {
	t.Helper()
	managertest.Create(t, env.Client, objs...)
}

// lockIs checks, for kubeenv.Eventually and Consistently, that the lock of
// cluster in ns exists and passes check.
func lockIs(t testing.TB, ns, cluster string, check func(*corev1.ConfigMap) error) func() error {
	return func() error {
		cm, err := getLock(t, ns, cluster)
		if err != nil {
			return err
		}
		return check(cm)
	}
}

// present is lockIs's check that the lock exists.
func present(*corev1.ConfigMap) error { return nil }

// ownedBy is lockIs's check that the lock is owned by cluster.
func ownedBy(cluster *unstructured.Unstructured) func(*corev1.ConfigMap) error {
	return func(cm *corev1.ConfigMap) error { return kubeenv.LockOwnedBy(cm, cluster) }
}

// holds is lockIs's check that the lock names holder.
func holds(holder string) func(*corev1.ConfigMap) error {
	return func(cm *corev1.ConfigMap) error {
		if rec, _ := wire.DecodeRecord(cm.Data[wire.DataKey]); rec.MachineName != holder {
			return fmt.Errorf("the lock names %q, want its holder %s", rec.MachineName, holder)
		}
		return nil
	}
}

// unmarked is lockIs's check that the lock carries none of the
// annotations keys.
func unmarked(keys ...string) func(*corev1.ConfigMap) error {
	return func(cm *corev1.ConfigMap) error {
		for _, k := range keys {
			if _, ok := cm.Annotations[k]; ok {
				return fmt.Errorf("the lock still carries %s", k)
			}
		}
		return nil
	}
}

// getLock reads the lock of cluster: an error when there is none.
func getLock(t testing.TB, ns, cluster string) (*corev1.ConfigMap, error) {
	cm, err := kubeenv.GetLock(t.Context(), env.Client, ns, cluster)
	if cm == nil {
		return nil, cmp.Or(err, fmt.Errorf("no lock of cluster %s/%s", ns, cluster))
	}
	return cm, nil
}

func lockGone(t testing.TB, ns, cluster string) func() error {
	return kubeenv.LockGone(t.Context(), env.Client, ns, cluster)
}

func events(t testing.TB, ns, reason string) []eventsv1.Event {
	t.Helper()
	return managertest.Events(t, env.Client, ns, reason)
}

// eventCount checks, for kubeenv.Eventually and Consistently, that there
// are want events of reason in ns.
func eventCount(t testing.TB, ns, reason string, want int) func() error {
	return func() error {
		if n := len(events(t, ns, reason)); n != want {
			return fmt.Errorf("%d %s events, want %d", n, reason, want)
		}
		return nil
	}
}

func eventOn(t testing.TB, ns, reason, kind, name string) eventsv1.Event {
	t.Helper()
	return managertest.EventOn(t, env.Client, ns, reason, kind, name)
}

func deleteAndWait(t testing.TB, objs ...client.Object) {
	t.Helper()
	kubeenv.DeleteAndWait(t, env.Client, objs...)
}
