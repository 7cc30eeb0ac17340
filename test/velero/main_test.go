package velerosuite_test

import (
	"os"
	"testing"

	"github.com/vmware-tanzu/velero/pkg/plugin/framework"
	"k8s.io/client-go/kubernetes"
	corev1client "k8s.io/client-go/kubernetes/typed/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/initlock/initlock/internal/kubeenv"
	velerosuite "github.com/initlock/initlock/test/velero"
)

var env *kubeenv.Env

func TestMain(m *testing.M) {
	// Velero's plugin registry also asks its own executable, here the test
	// binary, for built-in plugins: answer that there are none.
	if os.Getenv(framework.Handshake().MagicCookieKey) == framework.Handshake().MagicCookieValue {
		framework.NewServer().Serve()
		os.Exit(0)
	}
	kubeenv.Main(m, kubeenv.Options{NoControllerManager: true}, &env)
}

// The plugin's cases against the real API server; internal/velero runs
// them against the model.

func apiServer() velerosuite.Backend {
	return velerosuite.Backend{
		New: func(t *testing.T) velerosuite.API {
			t.Helper()
			counter := &kubeenv.Counter{}
			cfg := counter.CountingConfig(env.Config)
			c, err := client.New(cfg, client.Options{Scheme: kubeenv.Scheme()})
			if err != nil {
				t.Fatal(err)
			}
			cs, err := kubernetes.NewForConfig(cfg)
			if err != nil {
				t.Fatal(err)
			}
			return velerosuite.API{
				Client:     c,
				Counter:    counter,
				Namespace:  func() string { return env.Namespace(t) },
				ConfigMaps: func(ns string) corev1client.ConfigMapInterface { return cs.CoreV1().ConfigMaps(ns) },
			}
		},
	}
}

func TestExecuteOnAPIServer(t *testing.T) { velerosuite.Execute(t, apiServer()) }

func TestSettingsOnAPIServer(t *testing.T) { velerosuite.Settings(t, apiServer()) }
