package clisuite

import (
	"sync"
	"testing"

	"github.com/initlock/initlock/internal/kubeenv"
	"github.com/initlock/initlock/pkg/initlock/capi"
)

// The cases of the commands against the real API server, with the
// project's lock guard installed (internal/cli runs them against the
// model), and those that need the real one: authorisation, the garbage
// collector, discovery, Velero's restore, and kinds the model does not
// serve.

var env *kubeenv.Env

func TestMain(m *testing.M) { kubeenv.Main(m, kubeenv.Options{LockGuard: true}, &env) }

var apiServer = sync.OnceValue(func() *Backend { return APIServer(env, capi.V1Beta2) })

func TestCommandsOnAPIServer(t *testing.T) { Run(t, apiServer()) }
