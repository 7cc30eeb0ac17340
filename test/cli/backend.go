package clisuite

import (
	"context"
	"fmt"
	"net/http"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/initlock/initlock/internal/cli"
	"github.com/initlock/initlock/internal/kubeenv"
	"github.com/initlock/initlock/internal/kubeenv/apimodel"
	"github.com/initlock/initlock/pkg/initlock/capi"
)

// Before is called before each request of a command leaves, with the
// request it is.
type Before func(ctx context.Context, r kubeenv.Request)

// Backend is an API server the cases run against: the real one (APIServer)
// or the model (Model).
type Backend struct {
	// Client reads and writes the fixtures as an admin; its requests are
	// not counted.
	Client client.Client
	// CAPIVersion is the Cluster API version the Clusters and Machines are
	// made in, the one the server serves.
	CAPIVersion string

	// namespace returns the namespace name, for golden output, or a
	// namespace of t's own when name is empty.
	namespace      func(t *testing.T, name string) string
	connect        func(t *testing.T, opts *cli.Options, counter *kubeenv.Counter, before Before) []string
	counting       func(counter *kubeenv.Counter) (client.Client, error)
	setInitialized func(ctx context.Context, c client.Client, cluster *unstructured.Unstructured) error
}

// APIServer is env's API server. A command reads the admin's kubeconfig
// and discovers the Cluster API version, as kubectl-initlock does.
func APIServer(env *kubeenv.Env, capiVersion string) *Backend {
	kubeconfig := sync.OnceValues(func() (string, error) {
		return env.WriteKubeconfig("initlock-cli-admin", []string{"system:masters"})
	})
	return &Backend{
		Client:      env.Client,
		CAPIVersion: capiVersion,
		namespace: func(t *testing.T, name string) string {
			t.Helper()
			if name == "" {
				return env.Namespace(t)
			}
			return fixedNamespace(t, env.Client, name)
		},
		connect: func(t *testing.T, opts *cli.Options, counter *kubeenv.Counter, before Before) []string {
			t.Helper()
			kc, err := kubeconfig()
			if err != nil {
				t.Fatalf("writing admin kubeconfig: %v", err)
			}
			opts.WrapConfig = func(cfg *rest.Config) *rest.Config {
				if counter != nil {
					cfg = counter.CountingConfig(cfg)
				}
				if before != nil {
					cfg = rest.CopyConfig(cfg)
					cfg.Wrap(func(rt http.RoundTripper) http.RoundTripper {
						return kubeenv.RoundTripperFunc(func(req *http.Request) (*http.Response, error) {
							before(req.Context(), kubeenv.Classify(req))
							return rt.RoundTrip(req)
						})
					})
				}
				return cfg
			}
			return []string{"--kubeconfig", kc}
		},
		counting: func(counter *kubeenv.Counter) (client.Client, error) {
			return client.New(counter.CountingConfig(env.Config), client.Options{Scheme: env.Client.Scheme()})
		},
		setInitialized: kubeenv.SetInitialized,
	}
}

// fixedNamespace creates a namespace with a fixed name, for golden output.
func fixedNamespace(t *testing.T, c client.Client, name string) string {
	t.Helper()
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}
	// An earlier run in this process (-count) may still be deleting it.
	kubeenv.Eventually(t, 60*time.Second, func() error {
		return c.Create(t.Context(), ns.DeepCopy())
	})
	t.Cleanup(func() {
		if err := c.Delete(context.WithoutCancel(t.Context()), ns); err != nil && !apierrors.IsNotFound(err) {
			t.Errorf("deleting namespace %s: %v", name, err)
		}
	})
	return name
}

// Model is a new model API server (internal/kubeenv/apimodel) with the
// project's lock guard, enforced and stored as installed (its policy and
// binding, which the commands read), serving Cluster API v1beta2. A
// command is given a client of it and the Cluster API version
// (Options.Client and CAPIVersion): no kubeconfig, no discovery.
func Model() (*Backend, error) {
	guard, err := apimodel.LockGuard()
	if err != nil {
		return nil, err
	}
	store := apimodel.NewStore()
	store.SetGuard(guard)
	installed, err := kubeenv.ReadLockGuard()
	if err != nil {
		return nil, err
	}
	admin := &apimodel.Client{Store: store, Actor: "admin"}
	for _, obj := range []client.Object{installed.Policy, installed.Binding} {
		if err := admin.Create(context.Background(), obj); err != nil {
			return nil, err
		}
	}
	// Creation times are now's, as the ages the commands print assume.
	store.SetNow(time.Now())
	var namespaces atomic.Int64
	return &Backend{
		Client:      &apimodel.Client{Store: store, Actor: "admin"},
		CAPIVersion: capi.V1Beta2,
		namespace: func(t *testing.T, name string) string {
			if name == "" {
				// The model has no namespace objects: a name of its own is one.
				name = fmt.Sprintf("%s-%d", kubeenv.NamespaceName(t.Name()), namespaces.Add(1))
			}
			return name
		},
		connect: func(_ *testing.T, opts *cli.Options, counter *kubeenv.Counter, before Before) []string {
			opts.Client = &apimodel.Client{Store: store, Gate: gate{counter: counter, before: before}, Actor: "kubectl-initlock"}
			opts.CAPIVersion = capi.V1Beta2
			return nil
		},
		counting: func(counter *kubeenv.Counter) (client.Client, error) {
			return &apimodel.Client{Store: store, Gate: apimodel.Counting{Counter: counter}, Actor: "reader"}, nil
		},
		setInitialized: apimodel.SetInitialized,
	}, nil
}

// gate serves a command's requests at once, calling before first and
// counting them when counter is set.
type gate struct {
	counter *kubeenv.Counter
	before  Before
}

func (g gate) Serve(ctx context.Context, r *apimodel.Request) {
	if g.before != nil {
		g.before(ctx, r.API())
	}
	if g.counter != nil {
		apimodel.Counting{Counter: g.counter}.Serve(ctx, r)
		return
	}
	r.Serve()
}

// Namespace returns a namespace of t's own.
func (b *Backend) Namespace(t *testing.T) string {
	t.Helper()
	return b.namespace(t, "")
}
