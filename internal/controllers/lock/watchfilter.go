package lock

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/initlock/initlock/pkg/initlock/capi"
)

// inScope tells whether the lock of a Cluster is the reconciler's to adopt
// under its watch filter (engine.Observation.OutOfScope): the Cluster must
// carry the filter label; a lock whose Cluster does not exist (an orphan)
// must carry it itself, since nothing else tells which manager it belongs
// to. The filter decides what the reconciler takes care of, never what it
// lets go: a lock out of scope is still released and collected when that
// is safe. Without a filter every lock is in scope, and nothing is read.
func (r *Reconciler) inScope(ctx context.Context, key types.NamespacedName, clusterExists bool, lock *corev1.ConfigMap) (bool, error) {
	if r.WatchFilter == "" {
		return true, nil
	}
	if clusterExists {
		cluster := &unstructured.Unstructured{}
		cluster.SetGroupVersionKind(capi.ClusterGVK(r.CAPIVersion))
		if err := r.Client.Get(ctx, key, cluster); err != nil {
			return false, client.IgnoreNotFound(fmt.Errorf("reading Cluster %s for the watch filter: %w", key, err))
		}
		return capi.InWatchFilter(cluster, r.WatchFilter), nil
	}
	return lock != nil && capi.InWatchFilter(lock, r.WatchFilter), nil
}
