package relink_test

import (
	"testing"

	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/initlock/initlock/internal/kubeenv"
	"github.com/initlock/initlock/internal/kubeenv/apimodel"
	relinksuite "github.com/initlock/initlock/test/relink"
)

// The relinker's reconcile cases (test/relink) against the model API
// server: no control plane. The same cases run against the real API
// server there, where the relinker also runs in a manager, with its cache
// and watches.

func model() relinksuite.Backend {
	return relinksuite.Backend{
		New: func(t *testing.T) (client.Client, string, *kubeenv.Counter) {
			t.Helper()
			counter := &kubeenv.Counter{}
			return &apimodel.Client{Store: apimodel.NewStore(), Gate: apimodel.Counting{Counter: counter}, Actor: "relinker"},
				kubeenv.NamespaceName(t.Name()), counter
		},
	}
}

func TestReconcile(t *testing.T) { relinksuite.Reconcile(t, model()) }

func TestPending(t *testing.T) { relinksuite.Pending(t, model()) }
