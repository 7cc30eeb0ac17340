package capi

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

const (
	// Group is the Cluster API core group.
	Group = "cluster.x-k8s.io"
	// V1Beta2 is the version Cluster API stores since v1.11.
	V1Beta2 = "v1beta2"
	// V1Beta1 is the version older management clusters serve.
	V1Beta1 = "v1beta1"

	// clusterKind is the kind of the object that owns a lock.
	clusterKind = "Cluster"
	// machineKind is the kind of a lock holder.
	machineKind = "Machine"

	// ClusterNameLabel names the Cluster an object belongs to.
	ClusterNameLabel = "cluster.x-k8s.io/cluster-name"
	// PausedAnnotation pauses reconciliation of an object when present.
	PausedAnnotation = "cluster.x-k8s.io/paused"
	// controlPlaneInitializedCondition is the condition type that turns
	// true once the first control-plane node has run kubeadm init.
	controlPlaneInitializedCondition = "ControlPlaneInitialized"
)

// ClusterGVK returns the Cluster kind in the given version.
func ClusterGVK(version string) schema.GroupVersionKind {
	return schema.GroupVersionKind{Group: Group, Version: version, Kind: clusterKind}
}

// MachineGVK returns the Machine kind in the given version.
func MachineGVK(version string) schema.GroupVersionKind {
	return schema.GroupVersionKind{Group: Group, Version: version, Kind: machineKind}
}

// IsPaused tells whether a Cluster is paused: spec.paused is true or the
// paused annotation is present (with any value).
func IsPaused(cluster *unstructured.Unstructured) bool {
	if _, ok := cluster.GetAnnotations()[PausedAnnotation]; ok {
		return true
	}
	paused, _, _ := unstructured.NestedBool(cluster.Object, "spec", "paused")
	return paused
}

// IsControlPlaneInitialized tells whether the Cluster's control plane has
// been initialised. v1beta2 Clusters report it in
// status.initialization.controlPlaneInitialized; both versions report the
// ControlPlaneInitialized condition, which v1beta1 keeps in status.conditions
// and, from Cluster API v1.9, also in status.v1beta2.conditions, and which
// v1beta2 keeps in status.conditions and status.deprecated.v1beta1.conditions.
func IsControlPlaneInitialized(cluster *unstructured.Unstructured) bool {
	if ok, found, _ := unstructured.NestedBool(cluster.Object, "status", "initialization", "controlPlaneInitialized"); found && ok {
		return true
	}
	for _, path := range [][]string{
		{"status", "conditions"},
		{"status", "v1beta2", "conditions"},
		{"status", "deprecated", "v1beta1", "conditions"},
	} {
		if conditionTrue(cluster.Object, path, controlPlaneInitializedCondition) {
			return true
		}
	}
	return false
}

func conditionTrue(obj map[string]any, path []string, condType string) bool {
	conds, found, err := unstructured.NestedSlice(obj, path...)
	if !found || err != nil {
		return false
	}
	for _, c := range conds {
		m, ok := c.(map[string]any)
		if !ok {
			continue
		}
		if m["type"] == condType && m["status"] == string(metav1.ConditionTrue) {
			return true
		}
	}
	return false
}
