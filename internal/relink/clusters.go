package relink

import (
	"context"
	"slices"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/initlock/initlock/pkg/initlock/capi"
)

var clusterGK = schema.GroupKind{Group: capi.Group, Kind: "Cluster"}

// clusterNames returns the names of the Clusters an object belongs to, in
// its namespace: the one its cluster-name label names, then those it
// records as owners. A cluster-scoped object belongs to none.
func clusterNames(obj client.Object, owners []OwnerRef) []string {
	if obj.GetNamespace() == "" {
		return nil
	}
	var names []string
	if c := obj.GetLabels()[capi.ClusterNameLabel]; c != "" {
		names = append(names, c)
	}
	for _, o := range owners {
		if o.GroupKind() == clusterGK && !slices.Contains(names, o.Name) {
			names = append(names, o.Name)
		}
	}
	return names
}

// clustersOf returns the Clusters an object belongs to (clusterNames) that
// the cache holds; a Cluster is its own.
func (r *Relinker) clustersOf(ctx context.Context, k *kind, obj client.Object, owners []OwnerRef) ([]*unstructured.Unstructured, error) {
	if k.cluster {
		return []*unstructured.Unstructured{obj.(*unstructured.Unstructured)}, nil
	}
	var out []*unstructured.Unstructured
	for _, name := range clusterNames(obj, owners) {
		cl := r.byGK[clusterGK].newObject()
		err := r.objects.Get(ctx, types.NamespacedName{Namespace: obj.GetNamespace(), Name: name}, cl)
		if apierrors.IsNotFound(err) {
			continue
		}
		if err != nil {
			return nil, err
		}
		out = append(out, cl.(*unstructured.Unstructured))
	}
	return out, nil
}

// pausedCluster returns the name of a paused Cluster among clusters, or "".
func pausedCluster(clusters []*unstructured.Unstructured) string {
	for _, cl := range clusters {
		if capi.IsPaused(cl) {
			return cl.GetName()
		}
	}
	return ""
}
