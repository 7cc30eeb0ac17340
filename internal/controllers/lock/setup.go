package lock

import (
	"context"
	"maps"
	"strings"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/initlock/initlock/pkg/initlock/capi"
)

// ControllerName names the controller in logs and metrics.
const ControllerName = "initlock"

// SetupWithManager registers the controller with mgr: it reconciles
// Clusters, and is also triggered by lock ConfigMaps (mapped to their Cluster
// by label and by name, so that a lock whose Cluster is gone still reaches
// it) and by the creation and deletion of Machines (mapped by the
// cluster-name label). concurrency is the number of Clusters reconciled at
// once; 0 means one.
//
// The manager's cache must hold the ConfigMaps with the cluster-name label
// and the Machines as metadata; New in internal/manager configures it so.
func (r *Reconciler) SetupWithManager(mgr ctrl.Manager, concurrency int) error {
	registerMetrics()
	cluster := &unstructured.Unstructured{}
	cluster.SetGroupVersionKind(capi.ClusterGVK(r.CAPIVersion))
	machine := &metav1.PartialObjectMetadata{}
	machine.SetGroupVersionKind(capi.MachineGVK(r.CAPIVersion))

	err := ctrl.NewControllerManagedBy(mgr).
		Named(ControllerName).
		For(cluster, builder.WithPredicates(clusterChanged())).
		Watches(&corev1.ConfigMap{}, handler.EnqueueRequestsFromMapFunc(lockToClusters)).
		WatchesMetadata(machine, handler.EnqueueRequestsFromMapFunc(machineToCluster),
			builder.WithPredicates(createdOrDeleted())).
		WithOptions(controller.Options{MaxConcurrentReconciles: concurrency}).
		Complete(r)
	if err != nil {
		return err
	}
	// Take this reconciler's locks out of the gauge when the manager stops.
	return mgr.Add(manager.RunnableFunc(func(ctx context.Context) error {
		<-ctx.Done()
		r.states.reset()
		r.plans.reset()
		return nil
	}))
}

// lockToClusters maps a ConfigMap to the Cluster its label names and, when
// its name is "<name>-lock" for another name, to that Cluster too: the
// reconcile of each finds out whether it is really its lock.
func lockToClusters(_ context.Context, obj client.Object) []reconcile.Request {
	var out []reconcile.Request
	label := obj.GetLabels()[capi.ClusterNameLabel]
	if label != "" {
		out = append(out, request(obj.GetNamespace(), label))
	}
	if name, ok := strings.CutSuffix(obj.GetName(), "-lock"); ok && name != "" && name != label {
		out = append(out, request(obj.GetNamespace(), name))
	}
	return out
}

// machineToCluster maps a Machine to its Cluster by the cluster-name label.
func machineToCluster(_ context.Context, obj client.Object) []reconcile.Request {
	if name := obj.GetLabels()[capi.ClusterNameLabel]; name != "" {
		return []reconcile.Request{request(obj.GetNamespace(), name)}
	}
	return nil
}

func request(namespace, name string) reconcile.Request {
	return reconcile.Request{NamespacedName: types.NamespacedName{Namespace: namespace, Name: name}}
}

// clusterChanged passes Cluster updates that may change what the lock
// decision reads (UID, paused, initialised, deleting, and the annotations,
// which hold the grant register) and the periodic resyncs; status churn
// that changes none of these does not reconcile.
func clusterChanged() predicate.Predicate {
	return predicate.Funcs{
		UpdateFunc: func(e event.UpdateEvent) bool {
			if e.ObjectOld == nil || e.ObjectNew == nil {
				return true
			}
			if e.ObjectOld.GetResourceVersion() == e.ObjectNew.GetResourceVersion() {
				return true // resync
			}
			oldIn, okOld := decisionInputs(e.ObjectOld)
			newIn, okNew := decisionInputs(e.ObjectNew)
			return !okOld || !okNew || oldIn != newIn || !maps.Equal(e.ObjectOld.GetAnnotations(), e.ObjectNew.GetAnnotations())
		},
	}
}

// inputs is what a lock decision reads of a Cluster, but its annotations.
type inputs struct {
	uid                           types.UID
	paused, initialized, deleting bool
}

// decisionInputs reads them from a Cluster of the cache (unstructured);
// ok is false for any other object.
func decisionInputs(obj client.Object) (in inputs, ok bool) {
	u, ok := obj.(*unstructured.Unstructured)
	if !ok {
		return inputs{}, false
	}
	return inputs{uid: u.GetUID(), paused: capi.IsPaused(u), initialized: capi.IsControlPlaneInitialized(u),
		deleting: u.GetDeletionTimestamp() != nil}, true
}

// createdOrDeleted passes Machine creations and deletions, which decide
// whether a lock's holder exists, and resyncs; other updates do not matter.
func createdOrDeleted() predicate.Predicate {
	return predicate.Funcs{
		UpdateFunc: func(e event.UpdateEvent) bool {
			return e.ObjectOld != nil && e.ObjectNew != nil &&
				e.ObjectOld.GetResourceVersion() == e.ObjectNew.GetResourceVersion()
		},
	}
}
