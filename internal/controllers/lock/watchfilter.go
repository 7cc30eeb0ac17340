package lock

import (
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/initlock/initlock/internal/capi"
)

// inScope tells whether the lock of a Cluster is the reconciler's to handle
// under its watch filter: the Cluster must carry the filter label; a lock
// whose Cluster does not exist (an orphan) must carry it itself, since
// nothing else tells which manager it belongs to. Without a filter every
// lock is in scope.
func (r *Reconciler) inScope(cluster *unstructured.Unstructured, lock *corev1.ConfigMap) bool {
	if r.WatchFilter == "" {
		return true
	}
	if cluster != nil {
		return capi.InWatchFilter(cluster, r.WatchFilter)
	}
	return lock != nil && capi.InWatchFilter(lock, r.WatchFilter)
}
