package lock

import (
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/util/flowcontrol"
	"k8s.io/utils/clock"

	"github.com/initlock/initlock/pkg/initlock"
	"github.com/initlock/initlock/pkg/initlock/engine"
)

// Defaults of the event budget (see NewEventBudget).
const (
	DefaultEventQPS   float32 = 5
	DefaultEventBurst int     = 100
)

// eventBudget passes every Warning event on, and Normal events while its
// token bucket has a token. Each event is a write to the API server: after
// a restore of thousands of Clusters one LockAdopted event per lock would
// cost as many writes as the healing itself, and fill the events of the
// namespace. The logs and the initlock_lock_* counters record every write
// whether or not its event was emitted.
type eventBudget struct {
	next    initlock.EventRecorder
	limiter flowcontrol.PassiveRateLimiter
}

// NewEventBudget returns a recorder that emits Normal events through next
// at most qps per second on average, with bursts of burst, and drops the
// rest, counting them in initlock_events_dropped_total. Warning events are
// rare (one per lock and version) and always emitted. A qps of zero or
// less emits every event. clk nil is the real clock.
func NewEventBudget(next initlock.EventRecorder, qps float32, burst int, clk clock.PassiveClock) initlock.EventRecorder {
	if qps <= 0 || next == nil {
		return next
	}
	if clk == nil {
		clk = clock.RealClock{}
	}
	return &eventBudget{next: next, limiter: flowcontrol.NewTokenBucketPassiveRateLimiterWithClock(qps, max(burst, 1), clk)}
}

func (b *eventBudget) Eventf(regarding, related runtime.Object, eventtype, reason, action, note string, args ...any) {
	if eventtype != corev1.EventTypeWarning && !b.limiter.TryAccept() {
		eventsDroppedTotal.WithLabelValues(reason).Inc()
		return
	}
	b.next.Eventf(regarding, related, eventtype, reason, action, note, args...)
}

// warn emits a Warning event once per reason and resourceVersion of the
// offending ConfigMap.
func (r *Reconciler) warn(m *memo, clusterObj *unstructured.Unstructured, cm *corev1.ConfigMap, reason string, problem error) {
	key := reason + "/" + string(cm.UID) + "/" + cm.ResourceVersion
	if m.warned == key {
		return
	}
	m.warned = key
	warningsTotal.WithLabelValues(reason).Inc()
	var regarding, related runtime.Object = cm, nil
	if clusterObj != nil {
		regarding, related = clusterObj, cm
	}
	switch reason {
	case ReasonForeignConfigMap:
		r.event(regarding, related, corev1.EventTypeWarning, reason, "Inspect",
			"ConfigMap %s has the name of the cluster's init lock but is not a lock (%v); it is left untouched: rename or remove it", cm.Name, problem)
	case ReasonLockConflict:
		r.event(regarding, related, corev1.EventTypeWarning, reason, "Inspect",
			"Init lock %s is in conflict (%v): no Machine is granted it until one of them is gone or the control plane is initialised; "+
				"once you know which Machine runs kubeadm init, if any, release it with kubectl initlock release", cm.Name, problem)
	default:
		r.event(regarding, related, corev1.EventTypeWarning, reason, "Inspect",
			"Init lock %s cannot be read (%v); it is left untouched: repair it or release it with kubectl initlock", cm.Name, problem)
	}
}

// record updates the metrics and emits the event of a successful write.
func (r *Reconciler) record(clusterObj *unstructured.Unstructured, cm *corev1.ConfigMap, obs engine.Observation, d engine.Decision, now time.Time) {
	held := func() {
		start := cm.CreationTimestamp.Time
		if at := obs.Lock.Record.AcquiredAt; at != nil {
			start = *at
		}
		if !start.IsZero() && now.After(start) {
			holdDuration.Observe(now.Sub(start).Seconds())
		}
	}
	switch d.Action {
	case engine.ActionAdopt:
		adoptionsTotal.Inc()
		r.event(clusterObj, cm, corev1.EventTypeNormal, initlock.EventLockAdopted, "Adopt",
			"Init lock %s, held by Machine %s, is owned by this Cluster (UID %s) again", cm.Name, d.Holder, obs.Cluster.UID)
	case engine.ActionRelease:
		releasesTotal.WithLabelValues(d.Reason).Inc()
		held()
		regarding, related := about(clusterObj, cm)
		r.event(regarding, related, corev1.EventTypeNormal, initlock.EventLockReleased, "Release",
			"Init lock %s, held by Machine %s, was released (%s): %s", cm.Name, d.Holder, d.Reason, releaseWhy(d.Reason))
	case engine.ActionMarkOrphan:
		absenceMarksTotal.Inc()
		if d.Unmark {
			r.unmarked(clusterObj, cm, obs, d)
		}
	case engine.ActionUnmark:
		r.unmarked(clusterObj, cm, obs, d)
	case engine.ActionCollect:
		orphansCollectedTotal.Inc()
		held()
		r.event(cm, nil, corev1.EventTypeNormal, ReasonOrphanLockCollected, "Collect",
			"Orphan init lock %s was deleted: its Cluster was absent for the grace period of %s and its holder Machine %s does not exist", cm.Name, r.Policy.OrphanGrace, d.Holder)
	}
}

// unmarked reports that the write took off the marks that let anyone
// delete the lock.
func (r *Reconciler) unmarked(clusterObj *unstructured.Unstructured, cm *corev1.ConfigMap, obs engine.Observation, d engine.Decision) {
	regarding, related := about(clusterObj, cm)
	r.event(regarding, related, corev1.EventTypeWarning, ReasonLockUnmarked, "Unmark",
		"Init lock %s, held by Machine %s, carried a mark that lets anyone delete it (%s) with no release or move under way; the mark was taken off, so that the lock guard holds the lock again",
		cm.Name, d.Holder, marksOn(obs.Lock))
}

// marksOn names the marks lock l carries that let a delete through.
func marksOn(l *engine.Lock) string {
	switch {
	case l.Releasable && l.MoveMark:
		return engine.ReleaseAnnotation + " and " + engine.MoveAnnotation
	case l.MoveMark:
		return engine.MoveAnnotation
	}
	return engine.ReleaseAnnotation
}

// releaseWhy says, for an event, why a release was safe.
func releaseWhy(reason string) string {
	switch reason {
	case engine.ReasonInitialized:
		return "the control plane is initialised"
	case engine.ReasonClusterDeleting:
		return "the Cluster is being deleted"
	case engine.ReasonHolderGone:
		return "the Machine it names does not exist, and no grant protects another Machine; the next Machine may take it"
	}
	return reason
}

// about is what an event about lock cm regards: its Cluster, with the lock
// as related object, or the lock itself when the Cluster does not exist.
func about(clusterObj *unstructured.Unstructured, cm *corev1.ConfigMap) (regarding, related runtime.Object) {
	if clusterObj == nil {
		return cm, nil
	}
	return clusterObj, cm
}

func (r *Reconciler) event(regarding, related runtime.Object, eventtype, reason, action, note string, args ...any) {
	if r.Recorder == nil || regarding == nil {
		return
	}
	r.Recorder.Eventf(regarding, related, eventtype, reason, action, note, args...)
}
