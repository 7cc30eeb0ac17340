package relinksuite

import (
	"testing"

	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/initlock/initlock/internal/kubeenv"
)

// The relinker's reconcile cases against the real API server, with a
// client that reads and writes it directly; internal/relink runs them
// against the model.

func apiServer() Backend {
	return Backend{
		New: func(t *testing.T) (client.Client, string, *kubeenv.Counter) {
			t.Helper()
			counter := &kubeenv.Counter{}
			c, err := client.New(counter.CountingConfig(env.Config), client.Options{Scheme: kubeenv.Scheme()})
			if err != nil {
				t.Fatal(err)
			}
			return c, env.Namespace(t), counter
		},
		Collects: true,
	}
}

func TestReconcileOnAPIServer(t *testing.T) { Reconcile(t, apiServer()) }

func TestPendingOnAPIServer(t *testing.T) { Pending(t, apiServer()) }
