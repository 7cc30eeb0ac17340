package initlock

import (
	"context"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// Apply carries out a keeper's decision (the manager's or the CLI's) on the
// lock cm that o was observed from: ActionAdopt, ActionRelease,
// ActionMarkOrphan or ActionCollect, each one write made with optimistic
// concurrency (resourceVersion) or delete preconditions (UID and
// resourceVersion). ActionNone writes nothing. A conflict comes back as the
// API's Conflict error: the lock changed, observe it again.
//
// Apply refuses to write to a ConfigMap that is not a usable lock, whatever
// the decision says.
func Apply(ctx context.Context, c client.Writer, cm *corev1.ConfigMap, o Observation, d Decision, now time.Time) error {
	if d.Action == ActionNone {
		return nil
	}
	if cm == nil || o.Lock == nil {
		return fmt.Errorf("applying %s: no lock observed", d.Action)
	}
	if o.Lock.Problem != nil {
		return lockError(cm.Namespace, cm.Name, o.Lock.Problem)
	}
	switch d.Action {
	case ActionAdopt:
		if o.Cluster == nil {
			return fmt.Errorf("adopting lock %s/%s: its cluster does not exist", cm.Namespace, cm.Name)
		}
		var uid = o.Lock.Record.MachineUID
		if o.Holder != nil && o.Holder.UID != "" {
			uid = o.Holder.UID
		}
		_, err := adopt(ctx, c, cm, *o.Cluster, uid, false)
		return err
	case ActionRelease, ActionCollect:
		return c.Delete(ctx, cm, client.Preconditions{UID: &cm.UID, ResourceVersion: &cm.ResourceVersion})
	case ActionMarkOrphan:
		next := cm.DeepCopy()
		if next.Annotations == nil {
			next.Annotations = map[string]string{}
		}
		next.Annotations[ClusterAbsentAnnotation] = absentMark(now, cm.UID)
		return c.Patch(ctx, next, client.MergeFromWithOptions(cm, client.MergeFromWithOptimisticLock{}))
	}
	return fmt.Errorf("applying %s to lock %s/%s: not a keeper action", d.Action, cm.Namespace, cm.Name)
}

// Observe builds the Observation of a lock for a keeper from what it read:
// the ConfigMap (nil when missing), the Cluster (nil when missing) and
// whether the holder it names exists (holder nil when not).
func Observe(clusterName string, cm *corev1.ConfigMap, cluster *Cluster, holder *Machine) Observation {
	o := Observation{ClusterName: clusterName, Cluster: cluster, Holder: holder}
	if cm != nil {
		o.Lock = ObserveLock(cm, clusterName)
	}
	return o
}
