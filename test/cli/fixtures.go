package clisuite

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/initlock/initlock/internal/kubeenv"
)

// Fixtures. Clusters, Machines and locks are made as the Cluster API and
// the upstream bootstrap provider make them.

type clusterOpt func(*unstructured.Unstructured)

func paused(u *unstructured.Unstructured) { u.Object["spec"].(map[string]any)["paused"] = true }

func (b *Backend) newCluster(t *testing.T, ns, name string, initialised bool, opts ...clusterOpt) *unstructured.Unstructured {
	t.Helper()
	ctx := t.Context()
	u := kubeenv.NewCluster(b.CAPIVersion, ns, name)
	for _, o := range opts {
		o(u)
	}
	if err := b.Client.Create(ctx, u); err != nil {
		t.Fatalf("creating cluster %s/%s: %v", ns, name, err)
	}
	if initialised {
		if err := b.setInitialized(ctx, b.Client, u); err != nil {
			t.Fatal(err)
		}
	}
	return u
}

func (b *Backend) newMachine(t *testing.T, ns, cluster, name string, annotations map[string]string) *unstructured.Unstructured {
	t.Helper()
	u := kubeenv.NewMachine(b.CAPIVersion, ns, cluster, name)
	u.SetAnnotations(annotations)
	if err := b.Client.Create(t.Context(), u); err != nil {
		t.Fatalf("creating machine %s/%s: %v", ns, name, err)
	}
	return u
}

func ownerRef(cluster *unstructured.Unstructured) metav1.OwnerReference {
	return metav1.OwnerReference{APIVersion: cluster.GetAPIVersion(), Kind: "Cluster", Name: cluster.GetName(), UID: cluster.GetUID()}
}

// newLock writes a lock as the upstream provider does: label, record and
// an ownerReference to owner (none when owner is nil).
func (b *Backend) newLock(t *testing.T, ns, cluster, holder string, owner *unstructured.Unstructured) *corev1.ConfigMap {
	t.Helper()
	cm := kubeenv.NewLock(ns, cluster, holder, owner)
	if err := b.Client.Create(t.Context(), cm); err != nil {
		t.Fatalf("creating configmap %s/%s: %v", ns, cm.Name, err)
	}
	return cm
}

func (b *Backend) newConfigMap(t *testing.T, ns, name string, labels, data map[string]string, owner *unstructured.Unstructured) *corev1.ConfigMap {
	t.Helper()
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Labels: labels}, Data: data}
	if owner != nil {
		cm.OwnerReferences = []metav1.OwnerReference{ownerRef(owner)}
	}
	if err := b.Client.Create(t.Context(), cm); err != nil {
		t.Fatalf("creating configmap %s/%s: %v", ns, name, err)
	}
	return cm
}

// resourceVersions maps every ConfigMap of ns to its resourceVersion.
func (b *Backend) resourceVersions(t *testing.T, ns string) map[string]string {
	t.Helper()
	list := &corev1.ConfigMapList{}
	if err := b.Client.List(t.Context(), list, client.InNamespace(ns)); err != nil {
		t.Fatalf("listing configmaps: %v", err)
	}
	out := map[string]string{}
	for _, cm := range list.Items {
		out[cm.Name] = cm.ResourceVersion
	}
	return out
}
