package relink

import (
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/initlock/initlock/pkg/initlock/capi"
)

// filtered tells whether an object is outside Options.WatchFilter: it is
// inside when a Cluster it belongs to (clustersOf) carries the filter
// label, or, when none of its Clusters exists yet, when it carries the
// label itself. retry is true when no Cluster was found: the object is
// looked at again after the longest backoff, in case its Cluster is
// restored with the label.
func (r *Relinker) filtered(obj client.Object, clusters []*unstructured.Unstructured) (filtered, retry bool) {
	value := r.opts.WatchFilter
	if value == "" {
		return false, false
	}
	for _, cl := range clusters {
		if cl.GetLabels()[capi.WatchFilterLabel] == value {
			return false, false
		}
	}
	switch {
	case len(clusters) > 0:
		return true, false
	case obj.GetLabels()[capi.WatchFilterLabel] == value:
		return false, false
	}
	return true, true
}
