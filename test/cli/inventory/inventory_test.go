package inventorysuite

import (
	"testing"

	"github.com/initlock/initlock/internal/kubeenv"
	"github.com/initlock/initlock/pkg/initlock/capi"
	clisuite "github.com/initlock/initlock/test/cli"
)

var env *kubeenv.Env

func TestMain(m *testing.M) {
	kubeenv.Main(m, kubeenv.Options{CAPI: kubeenv.CAPIV1Beta1, NoControllerManager: true}, &env)
}

func TestGatherOnV1Beta1(t *testing.T) {
	version, err := capi.Discover(env.Discovery(t))
	if err != nil || version != capi.V1Beta1 {
		t.Fatalf("Discover = %q, %v", version, err)
	}
	clisuite.Gather(t, clisuite.APIServer(env, version))
}
