package relink

import (
	"context"
	"slices"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/initlock/initlock/pkg/initlock/capi"
)

// filtered tells whether an object is outside Options.WatchFilter: it is
// inside when a Cluster it belongs to (by its cluster-name label, by being
// that Cluster, or by recording it as owner) carries the filter label, or,
// when none of its Clusters exists yet, when it carries the label itself.
// retry is true when no Cluster was found: the object is looked at again
// after the longest backoff, in case its Cluster is restored with the label.
func (r *Relinker) filtered(ctx context.Context, k *kind, obj client.Object, owners []OwnerRef) (filtered, retry bool, _ error) {
	value := r.opts.WatchFilter
	if value == "" {
		return false, false, nil
	}
	if k.cluster {
		return !capi.InWatchFilter(obj, value), false, nil
	}
	var names []string
	if c := obj.GetLabels()[capi.ClusterNameLabel]; c != "" {
		names = append(names, c)
	}
	clusterGK := schema.GroupKind{Group: capi.Group, Kind: capi.ClusterKind}
	for _, o := range owners {
		if o.GroupKind() == clusterGK && !slices.Contains(names, o.Name) {
			names = append(names, o.Name)
		}
	}
	found := false
	for _, name := range names {
		cl := r.byGK[clusterGK].newObject()
		err := r.cache.Get(ctx, types.NamespacedName{Namespace: obj.GetNamespace(), Name: name}, cl)
		if apierrors.IsNotFound(err) {
			continue
		}
		if err != nil {
			return false, false, err
		}
		if capi.InWatchFilter(cl, value) {
			return false, false, nil
		}
		found = true
	}
	switch {
	case found:
		return true, false, nil
	case capi.InWatchFilter(obj, value):
		return false, false, nil
	}
	return true, true, nil
}
