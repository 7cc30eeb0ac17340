package kubeenv

import (
	"fmt"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/initlock/initlock/internal/kubeenv/wire"
	"github.com/initlock/initlock/pkg/initlock/capi"
)

// NewCluster returns a valid Cluster of the given version (v1beta2 or
// v1beta1), not yet created. A v1beta2 Cluster needs a non-empty spec, so it
// gets a control-plane endpoint.
func NewCluster(version, namespace, name string) *unstructured.Unstructured {
	u := &unstructured.Unstructured{}
	u.SetGroupVersionKind(capi.ClusterGVK(version))
	u.SetNamespace(namespace)
	u.SetName(name)
	u.Object["spec"] = map[string]any{
		"controlPlaneEndpoint": map[string]any{"host": name + ".example.test", "port": int64(6443)},
	}
	return u
}

// NewMachine returns a control-plane Machine of cluster, not yet created,
// with the cluster-name label and the fields every version requires.
func NewMachine(version, namespace, cluster, name string) *unstructured.Unstructured {
	u := &unstructured.Unstructured{}
	u.SetGroupVersionKind(capi.MachineGVK(version))
	u.SetNamespace(namespace)
	u.SetName(name)
	u.SetLabels(map[string]string{
		capi.ClusterNameLabel:            cluster,
		"cluster.x-k8s.io/control-plane": "",
	})
	bootstrap := map[string]any{"dataSecretName": name + "-bootstrap"}
	infra := map[string]any{"kind": "DockerMachine", "name": name}
	if version == capi.V1Beta1 {
		infra["apiVersion"] = "infrastructure.cluster.x-k8s.io/v1beta1"
	} else {
		infra["apiGroup"] = "infrastructure.cluster.x-k8s.io"
	}
	u.Object["spec"] = map[string]any{
		"clusterName":       cluster,
		"bootstrap":         bootstrap,
		"infrastructureRef": infra,
	}
	return u
}

// NewMachineGroup returns a valid MachineSet or MachineDeployment (kind)
// of cluster, not yet created, with the cluster-name label and a template
// of a Machine as NewMachine makes it.
func NewMachineGroup(kind, version, namespace, cluster, name string) *unstructured.Unstructured {
	u := &unstructured.Unstructured{}
	u.SetGroupVersionKind(capi.MachineGVK(version).GroupVersion().WithKind(kind))
	u.SetNamespace(namespace)
	u.SetName(name)
	u.SetLabels(map[string]string{capi.ClusterNameLabel: cluster})
	m := NewMachine(version, namespace, cluster, name)
	u.Object["spec"] = map[string]any{
		"clusterName": cluster,
		"selector":    map[string]any{"matchLabels": map[string]any{"pool": name}},
		"template": map[string]any{
			"metadata": map[string]any{"labels": map[string]any{"pool": name}},
			"spec":     m.Object["spec"],
		},
	}
	return u
}

// NewLock returns the lock of cluster held by machine, not yet created, in
// the format the upstream bootstrap providers write: the cluster-name label,
// the record with only machineName, and an ownerReference to owner when it
// is not nil.
func NewLock(namespace, cluster, machine string, owner *unstructured.Unstructured) *corev1.ConfigMap {
	cm := &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{
			Namespace: namespace,
			Name:      cluster + wire.LockSuffix,
			Labels:    map[string]string{wire.ClusterNameLabel: cluster},
		},
		Data: map[string]string{wire.DataKey: fmt.Sprintf(`{"machineName":%q}`, machine)},
	}
	if owner != nil {
		cm.OwnerReferences = []metav1.OwnerReference{{
			APIVersion: owner.GetAPIVersion(), Kind: owner.GetKind(), Name: owner.GetName(), UID: owner.GetUID(),
		}}
	}
	return cm
}

// LockOwnedBy checks that the lock exists (is not nil) and has exactly one
// Cluster ownerReference, to cluster's UID.
func LockOwnedBy(cm *corev1.ConfigMap, cluster *unstructured.Unstructured) error {
	if cm == nil {
		return fmt.Errorf("no lock, want one owned by %s/%s", cluster.GetName(), cluster.GetUID())
	}
	var refs []string
	for _, r := range cm.OwnerReferences {
		if r.Kind == "Cluster" {
			refs = append(refs, r.Name+"/"+string(r.UID))
		}
	}
	if len(refs) != 1 || refs[0] != cluster.GetName()+"/"+string(cluster.GetUID()) {
		return fmt.Errorf("lock %s owned by %v, want %s/%s", cm.Name, refs, cluster.GetName(), cluster.GetUID())
	}
	return nil
}

// Paused sets a Cluster's spec.paused.
func Paused(u *unstructured.Unstructured) {
	_ = unstructured.SetNestedField(u.Object, true, "spec", "paused")
}
