package manager

import (
	"flag"
	"fmt"
	"strconv"
	"time"

	"github.com/go-logr/logr"
	"k8s.io/utils/clock"
	ctrl "sigs.k8s.io/controller-runtime"

	"github.com/initlock/initlock/pkg/initlock"
)

// Options configure the manager New builds. Start from DefaultOptions: the
// zero value turns release-after-init off.
type Options struct {
	// Namespace is the one namespace to watch; "" watches all namespaces.
	Namespace string
	// OrphanGrace is how long a Cluster must have been absent before its
	// lock is collected.
	OrphanGrace time.Duration
	// OrphanSettle is how long a lock must be seen without its Cluster,
	// in memory, before the absence is recorded on the lock. Restores bring
	// ConfigMaps back before Clusters; waiting spares one write per lock.
	// It only ever lengthens the grace period.
	OrphanSettle time.Duration
	// ReleaseAfterInit releases a lock once its control plane is
	// initialised.
	ReleaseAfterInit bool
	// Concurrency is the number of Clusters reconciled at the same time.
	Concurrency int
	// KubeAPIQPS and KubeAPIBurst set the client rate limits; zero keeps
	// those of the rest.Config given to New.
	KubeAPIQPS   float32
	KubeAPIBurst int
	// MetricsBindAddress serves /metrics; "0" disables it.
	MetricsBindAddress string
	// HealthProbeBindAddress serves /healthz and /readyz; "0" disables it.
	HealthProbeBindAddress string
	// LeaderElection runs the controllers only in the replica holding the
	// Lease LeaderElectionID in LeaderElectionNamespace ("" means the
	// namespace the Pod runs in).
	LeaderElection          bool
	LeaderElectionID        string
	LeaderElectionNamespace string
	// LeaseDuration, RenewDeadline and RetryPeriod tune leader election;
	// zero keeps the controller-runtime defaults (15 s, 10 s, 2 s).
	LeaseDuration time.Duration
	RenewDeadline time.Duration
	RetryPeriod   time.Duration
	// SyncPeriod is how often every cached object is reconciled again
	// without a change; zero keeps the controller-runtime default (10 h).
	SyncPeriod time.Duration
	// Clock is the time source of decisions and records; nil is the real
	// clock.
	Clock clock.WithTicker
	// Logger is the manager's logger; the zero value uses ctrl.Log.
	Logger logr.Logger
	// Setups add further controllers or runnables to the manager, after the
	// lock controller. They run in New, in order.
	Setups []Setup
}

// Setup adds a controller or runnable to a manager built by New.
// capiVersion is the Cluster API version New discovered (v1beta2 or
// v1beta1).
type Setup func(mgr ctrl.Manager, capiVersion string) error

// Defaults of the flags and of DefaultOptions.
const (
	DefaultLeaderElectionID       = "initlock-manager.initlock.dev"
	DefaultMetricsBindAddress     = ":8080"
	DefaultHealthProbeBindAddress = ":8081"
	DefaultConcurrency            = 10
	DefaultOrphanSettle           = 30 * time.Second
	DefaultKubeAPIQPS             = 20
	DefaultKubeAPIBurst           = 30
)

// DefaultOptions returns the options the initlock-manager binary starts
// with when no flag is given: all namespaces, an orphan grace of 10 minutes,
// release after init, no leader election.
func DefaultOptions() Options {
	return Options{
		OrphanGrace:            initlock.DefaultPolicy.OrphanGrace,
		OrphanSettle:           DefaultOrphanSettle,
		ReleaseAfterInit:       initlock.DefaultPolicy.ReleaseAfterInit,
		Concurrency:            DefaultConcurrency,
		KubeAPIQPS:             DefaultKubeAPIQPS,
		KubeAPIBurst:           DefaultKubeAPIBurst,
		MetricsBindAddress:     DefaultMetricsBindAddress,
		HealthProbeBindAddress: DefaultHealthProbeBindAddress,
		LeaderElectionID:       DefaultLeaderElectionID,
	}
}

// BindFlags registers the manager's flags on fs, with o's values as
// defaults, writing the parsed values into o.
func (o *Options) BindFlags(fs *flag.FlagSet) {
	fs.StringVar(&o.Namespace, "namespace", o.Namespace, "The only namespace to watch; empty watches all namespaces.")
	fs.DurationVar(&o.OrphanGrace, "orphan-grace", o.OrphanGrace, "How long a lock's Cluster must have been absent before the lock is collected.")
	fs.DurationVar(&o.OrphanSettle, "orphan-settle", o.OrphanSettle, "How long a lock must be seen without its Cluster before the absence is recorded on it.")
	fs.BoolVar(&o.ReleaseAfterInit, "release-after-init", o.ReleaseAfterInit, "Release a lock once its Cluster's control plane is initialised.")
	fs.IntVar(&o.Concurrency, "concurrency", o.Concurrency, "Number of Clusters reconciled at the same time.")
	fs.Func("kube-api-qps", "Queries per second to the API server (default 20).", func(s string) error {
		return parseFloat32(s, &o.KubeAPIQPS)
	})
	fs.IntVar(&o.KubeAPIBurst, "kube-api-burst", o.KubeAPIBurst, "Burst of queries to the API server.")
	fs.StringVar(&o.MetricsBindAddress, "metrics-bind-address", o.MetricsBindAddress, "Address /metrics is served on; 0 disables it.")
	fs.StringVar(&o.HealthProbeBindAddress, "health-probe-bind-address", o.HealthProbeBindAddress, "Address /healthz and /readyz are served on; 0 disables them.")
	fs.BoolVar(&o.LeaderElection, "leader-elect", o.LeaderElection, "Run the controllers only in the replica that holds the leader-election Lease.")
	fs.StringVar(&o.LeaderElectionID, "leader-election-id", o.LeaderElectionID, "Name of the leader-election Lease.")
	fs.StringVar(&o.LeaderElectionNamespace, "leader-election-namespace", o.LeaderElectionNamespace, "Namespace of the leader-election Lease; empty is the Pod's namespace.")
	fs.DurationVar(&o.SyncPeriod, "sync-period", o.SyncPeriod, "How often every Cluster is reconciled without a change; 0 keeps the default of 10h.")
}

func parseFloat32(s string, into *float32) error {
	f, err := strconv.ParseFloat(s, 32)
	if err != nil {
		return fmt.Errorf("%q is not a number: %w", s, err)
	}
	*into = float32(f)
	return nil
}
