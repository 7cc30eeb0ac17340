package relinksuite

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/initlock/initlock/internal/kubeenv"
	"github.com/initlock/initlock/internal/kubeenv/velerosim"
	"github.com/initlock/initlock/internal/kubeenv/wire"
	"github.com/initlock/initlock/internal/relink"
	"github.com/initlock/initlock/internal/relink/secrets"
	"github.com/initlock/initlock/pkg/initlock/capi"
)

// graphKinds are the kinds of a cluster's object graph.
func graphKinds() []schema.GroupVersionKind {
	return []schema.GroupVersionKind{configMapGVK, secretGVK, capiGVK("Cluster"), capiGVK("MachineDeployment"),
		capiGVK("MachineSet"), capiGVK("Machine"), capiGVK("MachineHealthCheck")}
}

// TestVeleroRestoreRelinksTheGraph backs up the object graph of a Cluster,
// deletes its namespace, restores it the way Velero does with the plugin,
// and checks that the relinker rebuilds every ownerReference with the new
// UIDs, in one patch per object, and that deleting the Cluster then has the
// garbage collector remove the whole graph.
func TestVeleroRestoreRelinksTheGraph(t *testing.T) {
	ctx := t.Context()
	ns := env.Namespace(t)
	v := env.CAPIVersion

	// The graph: Cluster -> MachineDeployment -> MachineSet -> Machines;
	// Cluster -> Secrets, ConfigMaps and the init lock.
	cluster := create(t, kubeenv.NewCluster(v, ns, "c1"))
	md := machineGroup("MachineDeployment", ns, "c1", "c1-md-0")
	md.SetOwnerReferences([]metav1.OwnerReference{refTo(cluster, false)})
	create(t, md)
	ms := machineGroup("MachineSet", ns, "c1", "c1-md-0-x7k2p")
	ms.SetOwnerReferences([]metav1.OwnerReference{refTo(md, true)})
	create(t, ms)
	for i := range 3 {
		m := kubeenv.NewMachine(v, ns, "c1", fmt.Sprintf("c1-md-0-x7k2p-%d", i))
		m.SetOwnerReferences([]metav1.OwnerReference{refTo(ms, true)})
		create(t, m)
	}
	mhc := &unstructured.Unstructured{}
	mhc.SetGroupVersionKind(capiGVK("MachineHealthCheck"))
	mhc.SetNamespace(ns)
	mhc.SetName("c1-mhc")
	mhc.SetLabels(map[string]string{capi.ClusterNameLabel: "c1"})
	mhc.SetOwnerReferences([]metav1.OwnerReference{refTo(cluster, false)})
	mhc.Object["spec"] = map[string]any{"clusterName": "c1", "selector": map[string]any{"matchLabels": map[string]any{"pool": "c1-md-0"}}}
	create(t, mhc)
	for _, name := range []string{"c1-kubeconfig", "c1-ca", "c1-etcd"} {
		s := &corev1.Secret{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Labels: map[string]string{capi.ClusterNameLabel: "c1"},
				OwnerReferences: []metav1.OwnerReference{refTo(cluster, true)}},
			Type: "cluster.x-k8s.io/secret",
			Data: map[string][]byte{"value": []byte(name)},
		}
		if err := env.Client.Create(ctx, s); err != nil {
			t.Fatal(err)
		}
	}
	addons := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "c1-addons",
		Labels:          map[string]string{capi.ClusterNameLabel: "c1"},
		OwnerReferences: []metav1.OwnerReference{refTo(cluster, false)}}}
	lock := &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "c1" + wire.LockSuffix,
			Labels:          map[string]string{wire.ClusterNameLabel: "c1"},
			OwnerReferences: []metav1.OwnerReference{refTo(cluster, false)}},
		Data: map[string]string{wire.DataKey: wire.Record{Ref: wire.Ref{MachineName: "c1-md-0-x7k2p-0"}}.Encode()},
	}
	for _, cm := range []*corev1.ConfigMap{addons, lock} {
		if err := env.Client.Create(ctx, cm); err != nil {
			t.Fatal(err)
		}
	}

	// Record every ownerReference and every UID.
	items, err := velerosim.Backup(ctx, env.Client, ns, graphKinds()...)
	if err != nil {
		t.Fatal(err)
	}
	type key struct{ kind, name string }
	original := map[key][]metav1.OwnerReference{}
	oldUIDs := map[types.UID]key{}
	withOwners := 0
	for _, it := range items {
		k := key{it.GetKind(), it.GetName()}
		original[k] = it.GetOwnerReferences()
		oldUIDs[it.GetUID()] = k
		if len(original[k]) > 0 {
			withOwners++
		}
	}
	if withOwners != 11 {
		t.Fatalf("graph has %d objects with owners, want 11", withOwners)
	}

	// Disaster: the namespace goes.
	if err := env.Client.Delete(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); err != nil {
		t.Fatal(err)
	}
	kubeenv.Eventually(t, 60*time.Second, func() error {
		err := env.Client.Get(ctx, client.ObjectKey{Name: ns}, &corev1.Namespace{})
		if apierrors.IsNotFound(err) {
			return nil
		}
		if err != nil {
			return err
		}
		return fmt.Errorf("namespace %s still there", ns)
	})

	// The manager runs while Velero restores ns and the items, as the
	// project's simulator of it (velerosim) does: in Velero's default
	// resource order, each item with its metadata reset, without status,
	// labelled with the backup and restore names, and passed through every
	// restore item action of the plugin that applies to it, as Velero's
	// resolver decides.
	h := start(t, ns, secrets.Enable(relink.Options{}))
	if err := env.Client.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); err != nil {
		t.Fatalf("restoring namespace %s: %v", ns, err)
	}
	var order []string
	for _, u := range velerosim.Restore(t, env.Config, velerosim.Options{Actions: pluginActions()}, items...) {
		order = append(order, u.GetKind()+"/"+u.GetName())
	}
	if first, last := order[0], order[len(order)-1]; !strings.HasPrefix(first, "Secret/") || last != "Cluster/c1" {
		t.Fatalf("restore order %v: want Secrets first and the Cluster last", order)
	}

	// Every ownerReference is back, pointing at the new owners.
	newUIDs := map[key]types.UID{}
	kubeenv.Eventually(t, 60*time.Second, func() error {
		for _, it := range items {
			k := key{it.GetKind(), it.GetName()}
			u := get(t, it.GroupVersionKind(), ns, it.GetName())
			newUIDs[k] = u.GetUID()
			if v, ok := u.GetAnnotations()[relink.Annotation]; ok {
				return fmt.Errorf("%s %s not relinked yet (%s)", k.kind, k.name, v)
			}
		}
		return nil
	})
	for _, it := range items {
		k := key{it.GetKind(), it.GetName()}
		var want []metav1.OwnerReference
		for _, ref := range original[k] {
			owner, ok := oldUIDs[ref.UID]
			if !ok {
				t.Fatalf("%v: owner %s not in the backup", k, ref.Name)
			}
			ref.UID = newUIDs[owner]
			want = append(want, ref)
		}
		got := get(t, it.GroupVersionKind(), ns, it.GetName()).GetOwnerReferences()
		if !equalRefs(got, want) {
			t.Errorf("%s %s ownerReferences = %v, want %v", k.kind, k.name, got, want)
		}
		if newUIDs[k] == it.GetUID() {
			t.Errorf("%s %s kept its UID", k.kind, k.name)
		}
	}

	// Exactly one successful patch per relinked object, and no other
	// write; the garbage collector deletes nothing. Like Velero, the
	// restore patches each object's managedFields right after creating
	// it, so a relinker patch made in between is refused with 409
	// Conflict and retried: those are counted apart.
	kubeenv.Consistently(t, 2*time.Second, func() error {
		for _, it := range items {
			u := &unstructured.Unstructured{}
			u.SetGroupVersionKind(it.GroupVersionKind())
			if err := env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: it.GetName()}, u); err != nil {
				return fmt.Errorf("%s %s: %w", it.GetKind(), it.GetName(), err)
			}
		}
		return nil
	})
	patches, conflicts := h.patchesPerObject(t), h.conflictsPerObject()
	if len(patches) != withOwners {
		t.Errorf("%d objects patched, want %d: %v", len(patches), withOwners, patches)
	}
	refused := 0
	for obj, n := range patches {
		refused += conflicts[obj]
		if n-conflicts[obj] != 1 {
			t.Errorf("%s patched %d times, %d refused with 409 Conflict", obj, n, conflicts[obj])
		}
	}
	t.Logf("restored %d objects in the order %v; %d relinked with %d patches, %d of them refused with 409 Conflict and retried",
		len(items), order, len(patches), h.objectWrites(), refused)

	// Deleting the Cluster takes the whole graph with it.
	if err := env.Client.Delete(ctx, get(t, capiGVK("Cluster"), ns, "c1")); err != nil {
		t.Fatal(err)
	}
	kubeenv.Eventually(t, 60*time.Second, func() error {
		objs, err := velerosim.List(ctx, env.Client, ns, graphKinds()...)
		if err != nil {
			return err
		}
		var left []string
		for _, u := range objs {
			left = append(left, u.GetKind()+"/"+u.GetName())
		}
		if len(left) > 0 {
			slices.Sort(left)
			return errors.New(fmt.Sprint("left after deleting the Cluster: ", left))
		}
		return nil
	})
}
