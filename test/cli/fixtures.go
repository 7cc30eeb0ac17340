package clisuite

import (
	"strings"
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

// holderOf names the Machine of Cluster name that held writes: m1 of c1,
// m-x of c-x.
func holderOf(name string) string { return "m" + strings.TrimPrefix(name, "c") }

// held makes Cluster name with opts, initialised or not, its Machine
// (holderOf) and the lock that Machine holds, owned by the Cluster.
func (b *Backend) held(t *testing.T, ns, name string, initialised bool, opts ...clusterOpt) *unstructured.Unstructured {
	t.Helper()
	cl := b.newCluster(t, ns, name, initialised, opts...)
	b.newMachine(t, ns, name, holderOf(name), nil)
	b.newLock(t, ns, name, holderOf(name), cl)
	return cl
}

// unowned makes what held makes, but the lock has lost its ownerReference
// (as after a restore) and the Cluster is not initialised.
func (b *Backend) unowned(t *testing.T, ns, name string, opts ...clusterOpt) {
	t.Helper()
	b.newCluster(t, ns, name, false, opts...)
	b.newMachine(t, ns, name, holderOf(name), nil)
	b.newLock(t, ns, name, holderOf(name), nil)
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
		cm.OwnerReferences = []metav1.OwnerReference{{APIVersion: owner.GetAPIVersion(), Kind: "Cluster", Name: owner.GetName(), UID: owner.GetUID()}}
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

// expectLock fails t unless the lock of Cluster c1 of ns exists, or not,
// as exists says, after the command that printed r.
func (b *Backend) expectLock(t *testing.T, ns string, exists bool, r Result) {
	t.Helper()
	if got := kubeenv.MustGetLock(t, b.Client, ns, "c1") != nil; got != exists {
		t.Fatalf("lock of c1 exists: %t, want %t\nstdout:\n%s\nstderr:\n%s", got, exists, r.Out, r.Err)
	}
}
