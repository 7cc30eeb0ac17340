package kubeenv

import (
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/initlock/initlock/internal/capi"
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
