package keeper

import (
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/initlock/initlock/pkg/initlock/internal/engine"
	"github.com/initlock/initlock/pkg/initlock/internal/report"
)

// warn emits a Warning event once per reason and resourceVersion of the
// offending ConfigMap, and returns the reason when it emitted one.
func (k *Keeper) warn(m *memo, clusterObj *unstructured.Unstructured, cm *corev1.ConfigMap, reason string, problem error) string {
	key := reason + "/" + string(cm.UID) + "/" + cm.ResourceVersion
	if m.warned == key {
		return ""
	}
	m.warned = key
	var regarding, related runtime.Object = cm, nil
	if clusterObj != nil {
		regarding, related = clusterObj, cm
	}
	switch reason {
	case report.EventForeignConfigMap:
		k.event(regarding, related, corev1.EventTypeWarning, reason, "Inspect",
			"ConfigMap %s has the name of the cluster's init lock but is not a lock (%v); it is left untouched: rename or remove it", cm.Name, problem)
	case report.EventLockConflict:
		k.event(regarding, related, corev1.EventTypeWarning, reason, "Inspect",
			"Init lock %s is in conflict (%v): no Machine is granted it until one of them is gone or the control plane is initialised; "+
				"once you know which Machine runs kubeadm init, if any, release it with kubectl initlock release", cm.Name, problem)
	default:
		k.event(regarding, related, corev1.EventTypeWarning, reason, "Inspect",
			"Init lock %s cannot be read (%v); it is left untouched: repair it or release it with kubectl initlock", cm.Name, problem)
	}
	return reason
}

// record emits the event of a successful write and gives the report how
// long a released or collected lock was held.
func (k *Keeper) record(clusterObj *unstructured.Unstructured, cm *corev1.ConfigMap, obs engine.Observation, d engine.Decision, now time.Time, rep *Status) {
	held := func() {
		start := cm.CreationTimestamp.Time
		if at := obs.Lock.Record.AcquiredAt; at != nil {
			start = *at
		}
		if !start.IsZero() && now.After(start) {
			rep.HeldFor = now.Sub(start)
		}
	}
	switch d.Action {
	case engine.ActionAdopt:
		k.event(clusterObj, cm, corev1.EventTypeNormal, report.EventLockAdopted, "Adopt",
			"Init lock %s, held by Machine %s, is owned by this Cluster (UID %s) again", cm.Name, d.Holder, obs.Cluster.UID)
	case engine.ActionRelease:
		held()
		regarding, related := about(clusterObj, cm)
		k.event(regarding, related, corev1.EventTypeNormal, report.EventLockReleased, "Release",
			"Init lock %s, held by Machine %s, was released (%s): %s", cm.Name, d.Holder, d.Reason, releaseWhy(d.Reason))
	case engine.ActionMarkOrphan:
		if d.Unmark {
			k.unmarked(clusterObj, cm, obs, d)
		}
	case engine.ActionUnmark:
		k.unmarked(clusterObj, cm, obs, d)
	case engine.ActionCollect:
		held()
		k.event(cm, nil, corev1.EventTypeNormal, report.EventOrphanLockCollected, "Collect",
			"Orphan init lock %s was deleted: its Cluster was absent for the grace period of %s and its holder Machine %s does not exist", cm.Name, k.Policy.OrphanGrace, d.Holder)
	}
}

// unmarked reports that the write took off the marks that let anyone
// delete the lock.
func (k *Keeper) unmarked(clusterObj *unstructured.Unstructured, cm *corev1.ConfigMap, obs engine.Observation, d engine.Decision) {
	regarding, related := about(clusterObj, cm)
	k.event(regarding, related, corev1.EventTypeWarning, report.EventLockUnmarked, "Unmark",
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

func (k *Keeper) event(regarding, related runtime.Object, eventtype, reason, action, note string, args ...any) {
	if k.Recorder == nil || regarding == nil {
		return
	}
	k.Recorder.Eventf(regarding, related, eventtype, reason, action, note, args...)
}
