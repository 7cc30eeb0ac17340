package manager

import (
	"errors"
	"fmt"
	"net/http"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/selection"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	"k8s.io/client-go/discovery"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"k8s.io/utils/clock"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/config"
	"sigs.k8s.io/controller-runtime/pkg/healthz"

	"github.com/initlock/initlock/internal/controllers/lock"
	"github.com/initlock/initlock/pkg/initlock/capi"
	"github.com/initlock/initlock/pkg/initlock/keeper"
)

// Leader election needs the Lease and, for its events, core Events in the
// manager's own namespace only.
// +kubebuilder:rbac:groups=coordination.k8s.io,namespace=initlock-system,resources=leases,verbs=get;create;update
// +kubebuilder:rbac:groups="",namespace=initlock-system,resources=events,verbs=create;patch

// Scheme returns the scheme of the manager: the built-in types only.
// Cluster API objects are handled as unstructured or metadata-only objects.
func Scheme() *runtime.Scheme {
	s := runtime.NewScheme()
	utilruntime.Must(clientgoscheme.AddToScheme(s))
	return s
}

// New builds the initlock manager for cfg: it discovers the Cluster API
// version the API server serves (v1beta2, else v1beta1), configures a cache
// that holds only lock ConfigMaps (those with the cluster-name label),
// Clusters and Machine metadata, registers the lock controller and the
// health checks, then runs opts.Setups. Start it with Start.
func New(cfg *rest.Config, opts Options) (ctrl.Manager, error) {
	if cfg == nil {
		return nil, errors.New("building the initlock manager: no rest.Config")
	}
	if err := opts.Validate(); err != nil {
		return nil, err
	}
	registerBuildInfo()
	cfg = rest.CopyConfig(cfg)
	if opts.KubeAPIQPS > 0 {
		cfg.QPS = opts.KubeAPIQPS
	}
	if opts.KubeAPIBurst > 0 {
		cfg.Burst = opts.KubeAPIBurst
	}
	dc, err := discovery.NewDiscoveryClientForConfig(cfg)
	if err != nil {
		return nil, fmt.Errorf("building a discovery client: %w", err)
	}
	version, err := capi.Discover(dc)
	if err != nil {
		return nil, fmt.Errorf("choosing the Cluster API version: %w", err)
	}

	mgr, err := ctrl.NewManager(cfg, managerOptions(opts))
	if err != nil {
		return nil, fmt.Errorf("building the initlock manager: %w", err)
	}
	var clk clock.WithTicker = clock.RealClock{}
	if opts.Clock != nil {
		clk = opts.Clock
	}
	r := &lock.Reconciler{
		Client:      mgr.GetClient(),
		APIReader:   mgr.GetAPIReader(),
		Recorder:    lock.NewEventBudget(mgr.GetEventRecorder(lock.EventSource), opts.EventQPS, opts.EventBurst, clk),
		CAPIVersion: version,
		Policy: keeper.Policy{
			ReleaseAfterInit: opts.ReleaseAfterInit,
			OrphanGrace:      opts.OrphanGrace,
			OrphanSettle:     opts.OrphanSettle,
		},
		Clock:       clk,
		WatchFilter: opts.WatchFilter,
		ObserveOnly: opts.ObserveOnly,
	}
	if err := r.SetupWithManager(mgr, opts.Concurrency); err != nil {
		return nil, fmt.Errorf("setting up the lock controller: %w", err)
	}
	if opts.LockGuard != "" {
		check := guardCheck{reader: mgr.GetAPIReader(), name: opts.LockGuard, recorder: mgr.GetEventRecorder(lock.EventSource), clock: clk}
		if err := mgr.Add(check); err != nil {
			return nil, err
		}
	}
	if opts.HealthProbeBindAddress != "0" && opts.HealthProbeBindAddress != "" {
		if err := mgr.AddHealthzCheck("ping", healthz.Ping); err != nil {
			return nil, err
		}
		if err := mgr.AddReadyzCheck("cache", func(req *http.Request) error {
			if !mgr.GetCache().WaitForCacheSync(req.Context()) {
				return errors.New("cache not synced")
			}
			return nil
		}); err != nil {
			return nil, err
		}
	}
	for i, setup := range opts.Setups {
		if err := setup(mgr, version); err != nil {
			return nil, fmt.Errorf("setup %d: %w", i, err)
		}
	}
	return mgr, nil
}

// managerOptions translates Options for controller-runtime.
func managerOptions(opts Options) ctrl.Options {
	lockLabel, err := labels.NewRequirement(capi.ClusterNameLabel, selection.Exists, nil)
	utilruntime.Must(err) // a constant, valid label key

	cacheOpts := cache.Options{
		// Reading anything else through the cache is a bug: fail instead of
		// silently starting an informer for it.
		ReaderFailOnMissingInformer: true,
		DefaultTransform:            cache.TransformStripManagedFields(),
		ByObject: map[client.Object]cache.ByObject{
			// Only lock candidates: unrelated ConfigMaps never reach memory.
			&corev1.ConfigMap{}: {Label: labels.NewSelector().Add(*lockLabel)},
		},
	}
	if opts.Namespace != "" {
		cacheOpts.DefaultNamespaces = map[string]cache.Config{opts.Namespace: {}}
	}
	if opts.SyncPeriod > 0 {
		cacheOpts.SyncPeriod = ptr.To(opts.SyncPeriod)
	}
	mo := ctrl.Options{
		Scheme:                        Scheme(),
		Cache:                         cacheOpts,
		Client:                        client.Options{Cache: &client.CacheOptions{Unstructured: true}},
		Logger:                        opts.Logger,
		Metrics:                       metricsOptions(opts),
		HealthProbeBindAddress:        bindAddress(opts.HealthProbeBindAddress),
		LeaderElection:                opts.LeaderElection,
		LeaderElectionID:              opts.LeaderElectionID,
		LeaderElectionNamespace:       opts.LeaderElectionNamespace,
		LeaderElectionReleaseOnCancel: true,
		Controller: config.Controller{
			// Tests, the demo and the chaos runner start several managers
			// in one process.
			SkipNameValidation: ptr.To(true),
		},
	}
	if opts.LeaseDuration > 0 {
		mo.LeaseDuration = ptr.To(opts.LeaseDuration)
	}
	if opts.RenewDeadline > 0 {
		mo.RenewDeadline = ptr.To(opts.RenewDeadline)
	}
	if opts.RetryPeriod > 0 {
		mo.RetryPeriod = ptr.To(opts.RetryPeriod)
	}
	return mo
}

func bindAddress(a string) string {
	if a == "" {
		return "0"
	}
	return a
}
