package manager

import (
	"cmp"
	"errors"
	"flag"
	"fmt"
	"net"
	"strconv"
	"strings"
	"time"

	"github.com/go-logr/logr"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/client-go/tools/leaderelection"
	"k8s.io/utils/clock"
	ctrl "sigs.k8s.io/controller-runtime"

	"github.com/initlock/initlock/internal/controllers/lock"
	"github.com/initlock/initlock/pkg/initlock/capi"
	"github.com/initlock/initlock/pkg/initlock/keeper"
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
	// The mark records when the lock was first seen without its Cluster, so
	// the settle time does not lengthen the grace period, unless the
	// manager restarts within it (the memory is lost).
	OrphanSettle time.Duration
	// ReleaseAfterInit releases a lock once its control plane is
	// initialised.
	ReleaseAfterInit bool
	// ObserveOnly makes the manager read, decide and report (metrics,
	// events, logs) without writing to any lock or Cluster: the lock
	// controller reports what it would do (the LockActionPlanned event,
	// initlock_lock_planned_actions), and the initlock-manager binary
	// starts no relinker.
	ObserveOnly bool
	// LockGuard is the name of the lock guard's ValidatingAdmissionPolicy
	// and binding, which the manager checks are in force at start and
	// every 5 minutes on Clock (LockGuardMetric, the events
	// ReasonLockGuardNotInForce and ReasonLockGuardInForce);
	// empty checks nothing.
	LockGuard string
	// Concurrency is the number of Clusters reconciled at the same time.
	Concurrency int
	// KubeAPIQPS and KubeAPIBurst set the client rate limits; zero keeps
	// those of the rest.Config given to New.
	KubeAPIQPS   float32
	KubeAPIBurst int
	// EventQPS and EventBurst bound the Normal events (LockAdopted,
	// LockReleased, OrphanLockCollected) the manager emits: EventQPS per
	// second on average, with bursts of EventBurst; the rest are dropped
	// and counted. Warning events are always emitted. An EventQPS of zero
	// emits every event.
	EventQPS   float32
	EventBurst int
	// MetricsBindAddress serves /metrics; "0" disables it.
	MetricsBindAddress string
	// MetricsSecure serves /metrics over HTTPS, to clients that present a
	// bearer token the API server authenticates (TokenReview) and
	// authorises for "get" on the non-resource URL /metrics
	// (SubjectAccessReview). False serves plain HTTP to anyone.
	MetricsSecure bool
	// MetricsCertDir holds tls.crt and tls.key for the HTTPS metrics
	// server, reloaded when they change; "" (or a folder without them)
	// uses a self-signed certificate generated at start.
	MetricsCertDir string
	// EnableHTTP2 lets the HTTPS metrics server speak HTTP/2; off by
	// default, as in controller-runtime's scaffolding, against the HTTP/2
	// stream-reset attacks.
	EnableHTTP2 bool
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
	// WatchFilter, when set, limits the manager to the Clusters labelled
	// capi.WatchFilterLabel with this value, as Cluster API controllers started
	// with --watch-filter do; a lock whose Cluster does not exist is handled
	// only when it carries the label itself.
	WatchFilter string
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
	DefaultMetricsBindAddress     = ":8443"
	DefaultHealthProbeBindAddress = ":8081"
	DefaultConcurrency            = 10
	DefaultOrphanSettle           = 2 * time.Minute
	DefaultKubeAPIQPS             = 20
	DefaultKubeAPIBurst           = 30
)

// DefaultOptions returns the options the initlock-manager binary starts
// with when no flag is given: all namespaces, an orphan grace of 10 minutes,
// release after init, no leader election, metrics over HTTPS with
// authentication and authorisation.
func DefaultOptions() Options {
	return Options{
		OrphanGrace:            keeper.DefaultPolicy().OrphanGrace,
		OrphanSettle:           DefaultOrphanSettle,
		ReleaseAfterInit:       keeper.DefaultPolicy().ReleaseAfterInit,
		LockGuard:              DefaultLockGuard,
		Concurrency:            DefaultConcurrency,
		KubeAPIQPS:             DefaultKubeAPIQPS,
		KubeAPIBurst:           DefaultKubeAPIBurst,
		EventQPS:               lock.DefaultEventQPS,
		EventBurst:             lock.DefaultEventBurst,
		MetricsBindAddress:     DefaultMetricsBindAddress,
		MetricsSecure:          true,
		HealthProbeBindAddress: DefaultHealthProbeBindAddress,
		LeaderElectionID:       DefaultLeaderElectionID,
	}
}

// BindFlags registers the manager's flags on fs, with o's values as
// defaults, writing the parsed values into o.
func (o *Options) BindFlags(fs *flag.FlagSet) {
	fs.StringVar(&o.Namespace, "namespace", o.Namespace, "The only namespace to watch; empty watches all namespaces.")
	fs.DurationVar(&o.OrphanGrace, "orphan-grace", o.OrphanGrace, "How long a lock's Cluster must have been absent before the lock is collected, and how old a lock whose holder Machine is gone must be before it is released (a restore may bring the Cluster and the lock back before the Machines).")
	fs.DurationVar(&o.OrphanSettle, "orphan-settle", o.OrphanSettle, "How long a lock must be seen without its Cluster before the absence is recorded on it.")
	fs.BoolVar(&o.ReleaseAfterInit, "release-after-init", o.ReleaseAfterInit, "Release a lock once its Cluster's control plane is initialised.")
	fs.BoolVar(&o.ObserveOnly, "observe-only", o.ObserveOnly, "Read, decide and report (the event LockActionPlanned, the metric initlock_lock_planned_actions, logs) without writing to any lock or Cluster; the relinker does not run.")
	fs.StringVar(&o.LockGuard, "lock-guard", o.LockGuard, "Name of the lock guard's ValidatingAdmissionPolicy and binding, which the manager checks are in force ("+LockGuardMetric+", the events "+ReasonLockGuardNotInForce+" and "+ReasonLockGuardInForce+"); empty checks nothing.")
	fs.IntVar(&o.Concurrency, "concurrency", o.Concurrency, "Number of Clusters reconciled at the same time.")
	fs.Func("kube-api-qps", "Queries per second to the API server (default 20).", func(s string) error {
		return parseFloat32(s, &o.KubeAPIQPS)
	})
	fs.IntVar(&o.KubeAPIBurst, "kube-api-burst", o.KubeAPIBurst, "Burst of queries to the API server.")
	fs.Func("event-qps", fmt.Sprintf("Normal events (LockAdopted, LockReleased, OrphanLockCollected) emitted per second on average; the rest are dropped and counted in initlock_events_dropped_total, warnings are always emitted; 0 emits every event (default %g).", lock.DefaultEventQPS), func(s string) error {
		return parseFloat32(s, &o.EventQPS)
	})
	fs.IntVar(&o.EventBurst, "event-burst", o.EventBurst, "Normal events emitted at once before --event-qps applies.")
	fs.StringVar(&o.MetricsBindAddress, "metrics-bind-address", o.MetricsBindAddress, "Address /metrics is served on; 0 disables it.")
	fs.BoolVar(&o.MetricsSecure, "metrics-secure", o.MetricsSecure, "Serve /metrics over HTTPS to clients authorised for get on /metrics (TokenReview and SubjectAccessReview); false serves plain HTTP to anyone.")
	fs.StringVar(&o.MetricsCertDir, "metrics-cert-dir", o.MetricsCertDir, "Folder with tls.crt and tls.key for the HTTPS metrics server, reloaded when they change; empty uses a self-signed certificate.")
	fs.BoolVar(&o.EnableHTTP2, "enable-http2", o.EnableHTTP2, "Let the HTTPS metrics server speak HTTP/2.")
	fs.StringVar(&o.HealthProbeBindAddress, "health-probe-bind-address", o.HealthProbeBindAddress, "Address /healthz and /readyz are served on; 0 disables them.")
	fs.BoolVar(&o.LeaderElection, "leader-elect", o.LeaderElection, "Run the controllers only in the replica that holds the leader-election Lease.")
	fs.StringVar(&o.LeaderElectionID, "leader-election-id", o.LeaderElectionID, "Name of the leader-election Lease.")
	fs.StringVar(&o.LeaderElectionNamespace, "leader-election-namespace", o.LeaderElectionNamespace, "Namespace of the leader-election Lease; empty is the Pod's namespace.")
	fs.DurationVar(&o.LeaseDuration, "leader-elect-lease-duration", o.LeaseDuration, "How long a replica that stops renewing keeps the leader-election Lease; 0 keeps the default of 15s.")
	fs.DurationVar(&o.RenewDeadline, "leader-elect-renew-deadline", o.RenewDeadline, "How long the leader tries to renew the Lease before it gives up leading; 0 keeps the default of 10s.")
	fs.DurationVar(&o.RetryPeriod, "leader-elect-retry-period", o.RetryPeriod, "How often replicas try to acquire or renew the Lease; 0 keeps the default of 2s.")
	fs.StringVar(&o.WatchFilter, "watch-filter", o.WatchFilter, "Adopt only the locks of Clusters labelled "+capi.WatchFilterLabel+" with this value (Cluster API's watch filter); every lock is still released and collected when that is safe. Empty adopts every lock.")
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

// Validate checks the options as New does, before anything connects to the
// API server, and names every bad value with the flag that sets it.
func (o Options) Validate() error {
	var errs []error
	if o.OrphanGrace <= 0 {
		errs = append(errs, fmt.Errorf("--orphan-grace must be positive, got %s", o.OrphanGrace))
	}
	if o.OrphanSettle < 0 {
		errs = append(errs, fmt.Errorf("--orphan-settle must not be negative, got %s", o.OrphanSettle))
	}
	if o.Concurrency < 0 {
		errs = append(errs, fmt.Errorf("--concurrency must not be negative, got %d", o.Concurrency))
	}
	if o.KubeAPIQPS < 0 || o.KubeAPIBurst < 0 {
		errs = append(errs, fmt.Errorf("--kube-api-qps and --kube-api-burst must not be negative, got %g and %d", o.KubeAPIQPS, o.KubeAPIBurst))
	}
	if o.EventQPS < 0 || o.EventBurst < 0 {
		errs = append(errs, fmt.Errorf("--event-qps and --event-burst must not be negative, got %g and %d", o.EventQPS, o.EventBurst))
	}
	for flag, addr := range map[string]string{"--metrics-bind-address": o.MetricsBindAddress, "--health-probe-bind-address": o.HealthProbeBindAddress} {
		if addr == "" || addr == "0" {
			continue
		}
		if _, _, err := net.SplitHostPort(addr); err != nil {
			errs = append(errs, fmt.Errorf("%s=%q is not host:port or 0: %w", flag, addr, err))
		}
	}
	if o.LeaderElection && o.LeaderElectionID == "" {
		errs = append(errs, errors.New("leader election needs a Lease name (--leader-election-id)"))
	}
	errs = append(errs, o.validateLeaderElection()...)
	if msgs := validation.IsValidLabelValue(o.WatchFilter); len(msgs) > 0 {
		errs = append(errs, fmt.Errorf("--watch-filter=%q is not a label value: %s", o.WatchFilter, strings.Join(msgs, "; ")))
	}
	if len(errs) > 0 {
		return fmt.Errorf("invalid initlock manager options: %w", errors.Join(errs...))
	}
	return nil
}

// Leader-election timings controller-runtime uses for a zero value.
const (
	defaultLeaseDuration = 15 * time.Second
	defaultRenewDeadline = 10 * time.Second
	defaultRetryPeriod   = 2 * time.Second
)

// validateLeaderElection checks what client-go's leader election would
// refuse only once the manager starts: the lease must outlast the renew
// deadline, which must outlast the retry period with its jitter.
func (o Options) validateLeaderElection() []error {
	var errs []error
	for flag, d := range map[string]time.Duration{"--leader-elect-lease-duration": o.LeaseDuration, "--leader-elect-renew-deadline": o.RenewDeadline, "--leader-elect-retry-period": o.RetryPeriod} {
		if d < 0 {
			errs = append(errs, fmt.Errorf("%s must not be negative, got %s", flag, d))
		}
	}
	if len(errs) > 0 {
		return errs
	}
	lease, renew, retry := cmp.Or(o.LeaseDuration, defaultLeaseDuration), cmp.Or(o.RenewDeadline, defaultRenewDeadline), cmp.Or(o.RetryPeriod, defaultRetryPeriod)
	if lease <= renew {
		errs = append(errs, fmt.Errorf("--leader-elect-lease-duration (%s) must be longer than --leader-elect-renew-deadline (%s)", lease, renew))
	}
	if float64(renew) <= leaderelection.JitterFactor*float64(retry) {
		errs = append(errs, fmt.Errorf("--leader-elect-renew-deadline (%s) must be longer than %.1f times --leader-elect-retry-period (%s)", renew, leaderelection.JitterFactor, retry))
	}
	return errs
}
