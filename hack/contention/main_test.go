package contention

import (
	"flag"
	"testing"

	"github.com/go-logr/logr"
	ctrl "sigs.k8s.io/controller-runtime"

	"github.com/initlock/initlock/internal/kubeenv"
)

var (
	callers = flag.Int("contention.callers", 50, "Machines that call Lock at the same moment.")
	env     *kubeenv.Env
)

// TestMain starts a control plane for the benchmark and for the tests of
// the upstream lock's races.
func TestMain(m *testing.M) {
	flag.Parse()
	// The upstream lock logs every refusal; the benchmark counts them.
	ctrl.SetLogger(logr.Discard())
	kubeenv.Main(m, kubeenv.Options{CAPI: kubeenv.CAPIV1Beta2}, &env)
}
