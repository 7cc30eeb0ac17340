package velerosuite_test

import (
	"os"
	"testing"

	"github.com/vmware-tanzu/velero/pkg/plugin/framework"

	"github.com/initlock/initlock/internal/kubeenv"
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
