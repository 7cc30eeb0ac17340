package lock

import (
	"context"
	"sync"

	"github.com/prometheus/client_golang/prometheus"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"

	"github.com/initlock/initlock/pkg/initlock/capi"
	"github.com/initlock/initlock/pkg/initlock/keeper"
)

// ReasonLockActionPlanned is the Normal event of an observe-only
// reconciler whose decision for a Cluster's lock changed: the write it
// would make, and why.
const ReasonLockActionPlanned = "LockActionPlanned"

var plannedGauge = prometheus.NewGaugeVec(prometheus.GaugeOpts{
	Name: "initlock_lock_planned_actions",
	Help: "Locks by the write an observe-only manager (--observe-only) would make to them (none, adopt, unmark, release, mark-orphan, collect).",
}, []string{"action"})

// plannedActions are the values of initlock_lock_planned_actions, all
// present from the start.
var plannedActions = []string{"none", "adopt", "unmark", "release", "mark-orphan", "collect"}

// observe decides, on the cache, what Keep would do with the lock of the
// Cluster req names (keeper.Inspect) and reports it without acting: the
// metrics, and a LockActionPlanned event when the decision changes. It
// writes nothing to any lock or Cluster.
func (r *Reconciler) observe(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	s, err := keeper.Inspect(ctx, r.Client, keeper.Query{Namespace: req.Namespace, Cluster: req.Name,
		CAPIVersion: r.CAPIVersion, Policy: r.Policy, Now: r.now()})
	if err != nil {
		return ctrl.Result{}, err
	}
	r.count(req.NamespacedName, s)
	action := plannedAction(s)
	if !r.plans.set(req.NamespacedName, action) || action == "" || action == "none" {
		return ctrl.Result{RequeueAfter: s.RequeueAfter}, nil
	}
	ctrl.LoggerFrom(ctx).Info("Observing only: not writing the lock", "action", s.Action, "verdict", s.Verdict, "why", s.Why)
	regarding := &metav1.PartialObjectMetadata{ObjectMeta: metav1.ObjectMeta{Namespace: req.Namespace, Name: req.Name + "-lock"}}
	regarding.SetGroupVersionKind(corev1.SchemeGroupVersion.WithKind("ConfigMap"))
	if s.ClusterExists {
		regarding = &metav1.PartialObjectMetadata{ObjectMeta: metav1.ObjectMeta{Namespace: req.Namespace, Name: req.Name, UID: s.ClusterUID}}
		regarding.SetGroupVersionKind(capi.ClusterGVK(r.CAPIVersion))
	}
	r.Recorder.Eventf(regarding, nil, corev1.EventTypeNormal, ReasonLockActionPlanned, "ObserveLock",
		"Observing only (--observe-only): would %s the init lock (verdict %s): %s", s.Action, s.Verdict, s.Why)
	return ctrl.Result{RequeueAfter: s.RequeueAfter}, nil
}

// planTracker keeps the decision an observe-only reconciler last reported
// for each Cluster, so that initlock_lock_planned_actions counts each lock
// once and an event marks each change only.
type planTracker struct {
	mu    sync.Mutex
	plans map[types.NamespacedName]string
}

// plannedAction is the write Keep would make on the decision s: "" when no
// lock stands, "none" when it would wait (a paused Cluster, a grace
// period) or leave the lock as it is.
func plannedAction(s keeper.Status) string {
	switch {
	case s.Verdict == "" || s.Verdict == "free" || s.Verdict == "lost":
		return ""
	case s.Wait != "" || s.Action == "":
		return "none"
	}
	return s.Action
}

// set records action for key ("" forgets it) and tells whether it changed.
func (t *planTracker) set(key types.NamespacedName, action string) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	old, seen := t.plans[key]
	if seen && old == action {
		return false
	}
	if old != "" {
		plannedGauge.WithLabelValues(old).Dec()
	}
	if t.plans == nil {
		t.plans = map[types.NamespacedName]string{}
	}
	t.plans[key] = action
	if action != "" {
		plannedGauge.WithLabelValues(action).Inc()
	}
	return true
}

// reset takes every recorded decision out of the gauge.
func (t *planTracker) reset() {
	t.mu.Lock()
	defer t.mu.Unlock()
	for _, a := range t.plans {
		if a != "" {
			plannedGauge.WithLabelValues(a).Dec()
		}
	}
	t.plans = nil
}
