package capi

import (
	"fmt"
	"strings"

	"k8s.io/client-go/discovery"
)

// WatchFilterLabel selects the objects a controller started with
// --watch-filter=<value> handles: those labelled with that value.
const WatchFilterLabel = "cluster.x-k8s.io/watch-filter"

// Discover returns the version of the Cluster API core group that the API
// server prefers: v1beta2 where it is served, else v1beta1. It fails with a
// clear error when the Cluster API CRDs are not installed. It is the one
// function of this package that makes an API call.
func Discover(dc discovery.DiscoveryInterface) (string, error) {
	groups, err := dc.ServerGroups()
	if err != nil {
		return "", fmt.Errorf("discovering API groups: %w", err)
	}
	for _, g := range groups.Groups {
		if g.Name != Group {
			continue
		}
		var served []string
		for _, v := range g.Versions {
			served = append(served, v.Version)
			if v.Version == V1Beta2 {
				return V1Beta2, nil
			}
		}
		for _, v := range served {
			if v == V1Beta1 {
				return V1Beta1, nil
			}
		}
		return "", fmt.Errorf("group %s serves %s; initlock needs %s or %s", Group, strings.Join(served, ", "), V1Beta2, V1Beta1)
	}
	return "", fmt.Errorf("group %s is not served: install the Cluster API CRDs first", Group)
}
