package managersuite_test

import (
	"cmp"
	"fmt"
	"testing"

	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/initlock/initlock/internal/kubeenv"
	"github.com/initlock/initlock/internal/kubeenv/wire"
	"github.com/initlock/initlock/internal/manager"
	"github.com/initlock/initlock/test/managertest"
)

// Shorthands for the kubeenv and managertest helpers with this package's Env.

var (
	testOptions = managertest.Options
	lockFor     = kubeenv.NewLock
	ownedBy     = kubeenv.LockOwnedBy
	paused      = kubeenv.Paused
	writeVerbs  = kubeenv.WriteVerbs
)

func startManager(t testing.TB, cfg *rest.Config, opts manager.Options) *kubeenv.Running {
	return managertest.Start(t, cfg, opts)
}

func createCluster(t testing.TB, version, ns, name string, mutate ...func(*unstructured.Unstructured)) *unstructured.Unstructured {
	t.Helper()
	return managertest.CreateCluster(t, env.Client, version, ns, name, mutate...)
}

func createMachine(t testing.TB, version, ns, cluster, name string) *unstructured.Unstructured {
	t.Helper()
	return managertest.CreateMachine(t, env.Client, version, ns, cluster, name)
}

func create(t testing.TB, obj client.Object) {
	t.Helper()
	managertest.Create(t, env.Client, obj)
}

// namesHolder checks that cluster's lock in ns exists and names holder, for
// kubeenv.Eventually and Consistently.
func namesHolder(t testing.TB, ns, cluster, holder string) func() error {
	return func() error {
		cm, err := getLock(t, ns, cluster)
		if err != nil {
			return err
		}
		if rec, _ := wire.DecodeRecord(cm.Data[wire.DataKey]); rec.MachineName != holder {
			return fmt.Errorf("the lock names %q, want its holder %s", rec.MachineName, holder)
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

func eventOn(t testing.TB, ns, reason, kind, name string) {
	t.Helper()
	managertest.EventOn(t, env.Client, ns, reason, kind, name)
}

func deleteAndWait(t testing.TB, objs ...client.Object) {
	t.Helper()
	kubeenv.DeleteAndWait(t, env.Client, objs...)
}
