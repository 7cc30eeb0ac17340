package stack

import (
	"context"
	"fmt"
	"net/url"
	"os"
	"strconv"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/initlock/initlock/pkg/initlock/capi"
)

// Kinds of the Cluster API graph a Cluster of the stack is made of.
var (
	ClusterGVK       = capi.ClusterGVK(capi.V1Beta2)
	MachineGVK       = capi.MachineGVK(capi.V1Beta2)
	KubeadmConfigGVK = schema.GroupVersionKind{Group: "bootstrap.cluster.x-k8s.io", Version: "v1beta2", Kind: "KubeadmConfig"}
	LocalClusterGVK  = schema.GroupVersionKind{Group: InfraGroup, Version: InfraVersion, Kind: "LocalCluster"}
	LocalMachineGVK  = schema.GroupVersionKind{Group: InfraGroup, Version: InfraVersion, Kind: "LocalMachine"}
)

// GraphKinds are the kinds of a Cluster's object graph, as a backup of its
// namespace holds them.
var GraphKinds = []schema.GroupVersionKind{
	corev1.SchemeGroupVersion.WithKind("ConfigMap"), corev1.SchemeGroupVersion.WithKind("Secret"),
	ClusterGVK, MachineGVK, KubeadmConfigGVK, LocalClusterGVK, LocalMachineGVK,
}

// KubernetesVersion is the version the stack's Machines ask for.
const KubernetesVersion = "v1.37.2"

// ClusterOptions shape a Cluster of the stack.
type ClusterOptions struct {
	// Workload makes the management cluster's own API server the
	// Cluster's workload cluster: the LocalCluster's endpoint points at
	// it and the <cluster>-kubeconfig Secret holds an admin kubeconfig,
	// so that core can find a Machine's Node and CABPK can create join
	// tokens. Without it the endpoint is a TEST-NET address.
	Workload bool
}

// CreateCluster creates a Cluster with its LocalCluster, marked provisioned
// as an infrastructure provider would, and, with Workload, its kubeconfig
// Secret. Core then copies the endpoint and reports the infrastructure
// provisioned.
func (m *Mgmt) CreateCluster(ctx context.Context, ns, name string, opts ClusterOptions) error {
	host, port := "192.0.2.10", int64(6443)
	if opts.Workload {
		h, p, err := hostPort(m.Env.Config.Host)
		if err != nil {
			return err
		}
		host, port = h, p
		kubeconfig, err := m.Env.WriteKubeconfig("workload-"+ns+"-"+name, []string{"system:masters"})
		if err != nil {
			return err
		}
		b, err := os.ReadFile(kubeconfig)
		if err != nil {
			return err
		}
		s := &corev1.Secret{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name + "-kubeconfig",
				Labels: map[string]string{capi.ClusterNameLabel: name}},
			Type: "cluster.x-k8s.io/secret",
			Data: map[string][]byte{"value": b},
		}
		if err := m.Client.Create(ctx, s); err != nil {
			return fmt.Errorf("creating the kubeconfig Secret of %s/%s: %w", ns, name, err)
		}
	}
	lc := obj(LocalClusterGVK, ns, name)
	lc.Object["spec"] = map[string]any{"controlPlaneEndpoint": map[string]any{"host": host, "port": port}}
	if err := m.Client.Create(ctx, lc); err != nil {
		return fmt.Errorf("creating LocalCluster %s/%s: %w", ns, name, err)
	}
	if err := m.MarkProvisioned(ctx, LocalClusterGVK, ns, name); err != nil {
		return err
	}
	c := obj(ClusterGVK, ns, name)
	c.Object["spec"] = map[string]any{
		"infrastructureRef": map[string]any{"apiGroup": InfraGroup, "kind": "LocalCluster", "name": name},
	}
	if err := m.Client.Create(ctx, c); err != nil {
		return fmt.Errorf("creating Cluster %s/%s: %w", ns, name, err)
	}
	return nil
}

// ProviderID is the providerID of a LocalMachine and of its Node.
func ProviderID(ns, machine string) string { return "local://" + ns + "/" + machine }

// CreateMachine creates a Machine of cluster with its KubeadmConfig and its
// LocalMachine, marked provisioned; controlPlane makes it a control-plane
// Machine.
func (m *Mgmt) CreateMachine(ctx context.Context, ns, cluster, name string, controlPlane bool) error {
	return m.CreateMachineWithConfig(ctx, ns, cluster, name, controlPlane, nil)
}

// CreateMachineWithConfig is CreateMachine with fields added to the
// KubeadmConfig's spec (for example files whose content CABPK must read).
func (m *Mgmt) CreateMachineWithConfig(ctx context.Context, ns, cluster, name string, controlPlane bool, spec map[string]any) error {
	labels := map[string]any{capi.ClusterNameLabel: cluster}
	if controlPlane {
		labels["cluster.x-k8s.io/control-plane"] = ""
	}
	kc := obj(KubeadmConfigGVK, ns, name)
	kc.Object["metadata"].(map[string]any)["labels"] = labels
	kc.Object["spec"] = map[string]any{"format": "cloud-config"}
	for k, v := range spec {
		kc.Object["spec"].(map[string]any)[k] = v
	}
	if err := m.Client.Create(ctx, kc); err != nil {
		return fmt.Errorf("creating KubeadmConfig %s/%s: %w", ns, name, err)
	}
	lm := obj(LocalMachineGVK, ns, name)
	lm.Object["spec"] = map[string]any{"providerID": ProviderID(ns, name)}
	if err := m.Client.Create(ctx, lm); err != nil {
		return fmt.Errorf("creating LocalMachine %s/%s: %w", ns, name, err)
	}
	if err := m.MarkProvisioned(ctx, LocalMachineGVK, ns, name); err != nil {
		return err
	}
	mc := obj(MachineGVK, ns, name)
	mc.Object["metadata"].(map[string]any)["labels"] = labels
	mc.Object["spec"] = map[string]any{
		"clusterName": cluster,
		"version":     KubernetesVersion,
		"bootstrap": map[string]any{"configRef": map[string]any{
			"apiGroup": KubeadmConfigGVK.Group, "kind": KubeadmConfigGVK.Kind, "name": name,
		}},
		"infrastructureRef": map[string]any{"apiGroup": InfraGroup, "kind": "LocalMachine", "name": name},
	}
	if err := m.Client.Create(ctx, mc); err != nil {
		return fmt.Errorf("creating Machine %s/%s: %w", ns, name, err)
	}
	return nil
}

// BootstrapData returns the bootstrap data CABPK generated for a Machine,
// "" while there is none.
func (m *Mgmt) BootstrapData(ctx context.Context, ns, machine string) (string, error) {
	kc, err := m.Get(ctx, KubeadmConfigGVK, ns, machine)
	if err != nil || kc == nil {
		return "", err
	}
	name, _, _ := unstructured.NestedString(kc.Object, "status", "dataSecretName")
	if name == "" {
		return "", nil
	}
	s := &corev1.Secret{}
	if err := m.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, s); err != nil {
		return "", fmt.Errorf("reading bootstrap data %s: %w", name, err)
	}
	return string(s.Data["value"]), nil
}

// RegisterNode does what a machine booted with its bootstrap data does: it
// waits until CABPK has generated the data, then creates a Node with the
// LocalMachine's providerID in the workload cluster (the management
// cluster's own API server). Creating the Node earlier would have core
// report the control plane initialised while CABPK may still be working on
// the Machine's data.
func (m *Mgmt) RegisterNode(ctx context.Context, ns, machine string) error {
	err := Poll(ctx, 2*time.Minute, func(ctx context.Context) error {
		data, err := m.BootstrapData(ctx, ns, machine)
		if err != nil {
			return err
		}
		if data == "" {
			return fmt.Errorf("no bootstrap data for Machine %s/%s yet", ns, machine)
		}
		return nil
	})
	if err != nil {
		return err
	}
	n := &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: NodeName(ns, machine)},
		Spec:       corev1.NodeSpec{ProviderID: ProviderID(ns, machine)},
	}
	if err := m.Client.Create(ctx, n); err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("creating Node %s: %w", n.Name, err)
	}
	return nil
}

// NodeName is the name of the Node of a Machine of the stack.
func NodeName(ns, machine string) string { return ns + "-" + machine }

// MarkProvisioned sets status.initialization.provisioned of an
// infrastructure object, as its provider reports it.
func (m *Mgmt) MarkProvisioned(ctx context.Context, gvk schema.GroupVersionKind, ns, name string) error {
	u := obj(gvk, ns, name)
	patch := []byte(`{"status":{"initialization":{"provisioned":true}}}`)
	if err := m.Client.Status().Patch(ctx, u, client.RawPatch(types.MergePatchType, patch)); err != nil {
		return fmt.Errorf("marking %s %s/%s provisioned: %w", gvk.Kind, ns, name, err)
	}
	return nil
}

// SetPaused sets or clears a Cluster's spec.paused.
func (m *Mgmt) SetPaused(ctx context.Context, ns, name string, paused bool) error {
	u := obj(ClusterGVK, ns, name)
	patch := fmt.Appendf(nil, `{"spec":{"paused":%t}}`, paused)
	if err := m.Client.Patch(ctx, u, client.RawPatch(types.MergePatchType, patch)); err != nil {
		return fmt.Errorf("setting spec.paused of Cluster %s/%s to %t: %w", ns, name, paused, err)
	}
	return nil
}

// Get reads an object; nil when it does not exist.
func (m *Mgmt) Get(ctx context.Context, gvk schema.GroupVersionKind, ns, name string) (*unstructured.Unstructured, error) {
	u := obj(gvk, ns, name)
	err := m.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, u)
	if apierrors.IsNotFound(err) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("reading %s %s/%s: %w", gvk.Kind, ns, name, err)
	}
	return u, nil
}

// Poll calls f every 50 ms until it returns nil or timeout passes, and
// returns f's last error then.
func Poll(ctx context.Context, timeout time.Duration, f func(context.Context) error) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	for {
		err := f(ctx)
		if err == nil {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("not within %s: %w", timeout, err)
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// hostPort splits the host URL of a rest.Config.
func hostPort(host string) (string, int64, error) {
	u, err := url.Parse(host)
	if err != nil {
		return "", 0, fmt.Errorf("reading the API server address %q: %w", host, err)
	}
	port, err := strconv.ParseInt(u.Port(), 10, 64)
	if err != nil {
		return "", 0, fmt.Errorf("reading the API server port of %q: %w", host, err)
	}
	return u.Hostname(), port, nil
}

func obj(gvk schema.GroupVersionKind, ns, name string) *unstructured.Unstructured {
	u := &unstructured.Unstructured{}
	u.SetGroupVersionKind(gvk)
	u.SetNamespace(ns)
	u.SetName(name)
	return u
}
