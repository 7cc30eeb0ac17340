package capi

import (
	"fmt"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/discovery"

	libcapi "github.com/initlock/initlock/pkg/initlock/capi"
)

// The Cluster API facts the lock relies on are the library's; they are
// named here too so that the rest of the module has one package to import.
const (
	// Group is the Cluster API core group.
	Group = libcapi.Group
	// V1Beta2 is the version Cluster API stores since v1.11.
	V1Beta2 = libcapi.V1Beta2
	// V1Beta1 is the version older management clusters serve.
	V1Beta1 = libcapi.V1Beta1

	// ClusterKind is the kind of the object that owns a lock.
	ClusterKind = libcapi.ClusterKind
	// MachineKind is the kind of a lock holder.
	MachineKind = libcapi.MachineKind

	// ClusterNameLabel names the Cluster an object belongs to.
	ClusterNameLabel = libcapi.ClusterNameLabel
	// PausedAnnotation pauses reconciliation of an object when present.
	PausedAnnotation = libcapi.PausedAnnotation
	// ControlPlaneInitializedCondition is the condition type that turns
	// true once the first control-plane node has run kubeadm init.
	ControlPlaneInitializedCondition = libcapi.ControlPlaneInitializedCondition

	// WatchFilterLabel selects the objects a controller started with
	// --watch-filter=<value> handles: those labelled with that value.
	WatchFilterLabel = "cluster.x-k8s.io/watch-filter"
)

// The library's readers of Cluster API objects, under the names the rest of
// the module uses.
var (
	// ClusterGVK returns the Cluster kind in the given version.
	ClusterGVK = libcapi.ClusterGVK
	// MachineGVK returns the Machine kind in the given version.
	MachineGVK = libcapi.MachineGVK
	// IsClusterAPIVersion tells whether apiVersion is group/version of the
	// Cluster API core group, in any version.
	IsClusterAPIVersion = libcapi.IsClusterAPIVersion
	// IsPaused tells whether a Cluster is paused.
	IsPaused = libcapi.IsPaused
	// IsControlPlaneInitialized tells whether the Cluster's control plane
	// has been initialised.
	IsControlPlaneInitialized = libcapi.IsControlPlaneInitialized
)

// InWatchFilter tells whether obj is handled under the watch filter value,
// with Cluster API's semantics: every object when value is empty, else only
// objects labelled WatchFilterLabel=value.
func InWatchFilter(obj metav1.Object, value string) bool {
	return value == "" || obj.GetLabels()[WatchFilterLabel] == value
}

// Discover returns the version of the Cluster API core group that the API
// server prefers: v1beta2 where it is served, else v1beta1. It fails with a
// clear error when the Cluster API CRDs are not installed.
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
