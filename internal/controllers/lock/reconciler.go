package lock

import (
	"context"
	"sync"
	"time"

	"k8s.io/client-go/tools/events"

	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/clock"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/initlock/initlock/pkg/initlock/keeper"
)

// EventSource is the name the controller reports its events under.
const EventSource = "initlock-manager"

// Reconciler keeps the init lock of each Cluster owned, releases it after
// init and collects it when orphaned, through a keeper.Keeper, and keeps
// the initlock_* metrics. Set the exported fields, then call
// SetupWithManager.
type Reconciler struct {
	// Client reads through the manager's cache and writes to the API server.
	Client client.Client
	// APIReader reads the API server directly, to confirm what the cache
	// cannot show.
	APIReader client.Reader
	// Recorder emits the events.
	Recorder events.EventRecorder
	// CAPIVersion is the Cluster API version served (v1beta2 or v1beta1).
	CAPIVersion string
	// Policy is the keeper's policy.
	Policy keeper.Policy
	// Clock gives the time of decisions; nil is the real clock.
	Clock clock.PassiveClock
	// WatchFilter, when set, limits the adoption of locks to those of
	// Clusters labelled capi.WatchFilterLabel with this value (see
	// keeper.Keeper.WatchFilter); every lock is released and collected
	// when that is safe.
	WatchFilter string
	// ObserveOnly makes the reconciler decide as it would, on the cache,
	// and report the decision (initlock_lock_planned_actions, a
	// LockActionPlanned event when it changes) instead of acting on it:
	// it writes nothing to any lock or Cluster.
	ObserveOnly bool

	once   sync.Once
	keeper *keeper.Keeper
	states stateTracker
	plans  planTracker
}

var _ reconcile.Reconciler = (*Reconciler)(nil)

// The manager reads and patches locks (adoption, the orphan's mark, the
// release mark), deletes them with preconditions, and never creates one.
// +kubebuilder:rbac:groups="",resources=configmaps,verbs=get;list;watch;patch;delete
// +kubebuilder:rbac:groups=cluster.x-k8s.io,resources=clusters,verbs=get;list;watch
// +kubebuilder:rbac:groups=cluster.x-k8s.io,resources=machines,verbs=get;list;watch
// +kubebuilder:rbac:groups=events.k8s.io,resources=events,verbs=create;patch

// Reconcile keeps the lock of the Cluster req names (keeper.Keeper.Keep:
// at most one write, decided on the cache and confirmed against the API
// server) and records what it found and did in the metrics; with
// ObserveOnly it only decides and reports (observe).
func (r *Reconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	r.once.Do(func() {
		r.keeper = &keeper.Keeper{Client: r.Client, APIReader: r.APIReader, Recorder: r.Recorder,
			CAPIVersion: r.CAPIVersion, Policy: r.Policy, Clock: r.Clock, WatchFilter: r.WatchFilter}
	})
	if r.ObserveOnly {
		return r.observe(ctx, req)
	}
	s, err := r.keeper.Keep(ctx, req.NamespacedName)
	r.count(req.NamespacedName, s)
	return ctrl.Result{RequeueAfter: s.RequeueAfter}, err
}

// count records in the metrics what Keep found of the lock of the Cluster
// key, and did.
func (r *Reconciler) count(key types.NamespacedName, s keeper.Status) {
	switch s.Verdict {
	case "":
		// Keep did not look.
	case "free", "lost":
		r.states.set(key, "") // no lock stands
	default:
		r.states.set(key, s.Verdict)
	}
	if s.Warning != "" {
		warningsTotal.WithLabelValues(s.Warning).Inc()
	}
	if !s.Written {
		return
	}
	switch s.Action {
	case "adopt":
		adoptionsTotal.Inc()
	case "release":
		releasesTotal.WithLabelValues(s.Reason).Inc()
	case "mark-orphan":
		absenceMarksTotal.Inc()
	case "collect":
		orphansCollectedTotal.Inc()
	}
	if s.HeldFor > 0 {
		holdDuration.Observe(s.HeldFor.Seconds())
	}
}

// now is the time of decisions, on Clock.
func (r *Reconciler) now() time.Time {
	if r.Clock == nil {
		return time.Now()
	}
	return r.Clock.Now()
}
