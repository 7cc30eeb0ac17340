package lock_test

import (
	"testing"

	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/initlock/initlock/internal/kubeenv"
	"github.com/initlock/initlock/internal/kubeenv/apimodel"
	locksuite "github.com/initlock/initlock/test/controllers/lock"
)

// The reconciler's cases (test/controllers/lock) against the model API
// server, with the project's lock guard: no control plane. The same cases
// run against the real API server there.

func model() locksuite.Backend {
	return locksuite.Backend{
		New: func(t *testing.T) (client.WithWatch, string, *kubeenv.Counter) {
			t.Helper()
			guard, err := apimodel.LockGuard()
			if err != nil {
				t.Fatal(err)
			}
			store := apimodel.NewStore()
			store.SetGuard(guard)
			counter := &kubeenv.Counter{}
			return &apimodel.Client{Store: store, Gate: apimodel.Counting{Counter: counter}, Actor: "reconciler"},
				kubeenv.NamespaceName(t.Name()), counter
		},
		SetInitialized: apimodel.SetInitialized,
	}
}

func TestReconcile(t *testing.T) { locksuite.Reconcile(t, model()) }

func TestOrphanCollectedAfterHolderGone(t *testing.T) {
	locksuite.OrphanCollectedAfterHolderGone(t, model())
}

func TestReconcileInjected(t *testing.T) { locksuite.Injected(t, model()) }

func TestRegressionCachedClusterRecreated(t *testing.T) {
	locksuite.CachedClusterRecreated(t, model())
}

func TestMarkNeverOutlivesRelease(t *testing.T) { locksuite.MarkNeverOutlivesRelease(t, model()) }
