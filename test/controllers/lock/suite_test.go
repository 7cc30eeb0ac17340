package locksuite_test

import (
	"testing"

	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/initlock/initlock/internal/kubeenv"
	locksuite "github.com/initlock/initlock/test/controllers/lock"
)

// The cases against the real API server, with the project's lock guard
// installed; internal/controllers/lock runs them against the model.

var env *kubeenv.Env

func TestMain(m *testing.M) {
	kubeenv.Main(m, kubeenv.Options{CAPI: kubeenv.CAPIV1Beta2, LockGuard: true}, &env)
}

func apiServer() locksuite.Backend {
	return locksuite.Backend{
		New: func(t *testing.T) (client.WithWatch, string, *kubeenv.Counter) {
			t.Helper()
			counter := &kubeenv.Counter{}
			c, err := client.NewWithWatch(counter.CountingConfig(env.Config), client.Options{Scheme: kubeenv.Scheme()})
			if err != nil {
				t.Fatal(err)
			}
			return c, env.Namespace(t), counter
		},
		SetInitialized:   kubeenv.SetInitialized,
		GarbageCollector: true,
	}
}

func TestReconcileOnAPIServer(t *testing.T) { locksuite.Reconcile(t, apiServer()) }

func TestOrphanCollectedAfterHolderGone(t *testing.T) {
	locksuite.OrphanCollectedAfterHolderGone(t, apiServer())
}

func TestReconcileInjected(t *testing.T) { locksuite.Injected(t, apiServer()) }

func TestRegressionCachedClusterRecreated(t *testing.T) {
	locksuite.CachedClusterRecreated(t, apiServer())
}

func TestMarkNeverOutlivesRelease(t *testing.T) { locksuite.MarkNeverOutlivesRelease(t, apiServer()) }
