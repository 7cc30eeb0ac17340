//go:build e2e

package e2e_test

import (
	"fmt"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/initlock/initlock/internal/kubeenv"
	"github.com/initlock/initlock/internal/kubeenv/velerosim"
	"github.com/initlock/initlock/internal/kubeenv/wire"
	"github.com/initlock/initlock/pkg/initlock"
	"github.com/initlock/initlock/pkg/initlock/capi"
	"github.com/initlock/initlock/test/managertest"
)

// Names of the workload cluster and its control-plane Machines.
const (
	clusterName = "c1"
	// holderName is the Machine that ran kubeadm init and holds the lock.
	holderName = "cp-0"
	// secondName is a control-plane Machine created after the move.
	secondName = "cp-1"
)

var lockName = clusterName + wire.LockSuffix

// newMachine returns control-plane Machine name of the Cluster, owned by it
// as Cluster API's machine controller makes it, not yet created.
func newMachine(cluster *unstructured.Unstructured, name string) *unstructured.Unstructured {
	m := kubeenv.NewMachine(capi.V1Beta2, cluster.GetNamespace(), cluster.GetName(), name)
	m.SetOwnerReferences([]metav1.OwnerReference{clusterRef(cluster)})
	return m
}

func clusterRef(cluster *unstructured.Unstructured) metav1.OwnerReference {
	return metav1.OwnerReference{
		APIVersion: cluster.GetAPIVersion(), Kind: "Cluster", Name: cluster.GetName(), UID: cluster.GetUID(),
	}
}

func create(t *testing.T, e *kubeenv.Env, obj client.Object) {
	t.Helper()
	if err := e.Client.Create(t.Context(), obj); err != nil {
		t.Fatalf("creating %T %s/%s: %v", obj, obj.GetNamespace(), obj.GetName(), err)
	}
}

// get reads a Cluster API object of the given kind, as unstructured.
func get(t *testing.T, e *kubeenv.Env, kind, ns, name string) *unstructured.Unstructured {
	t.Helper()
	u := &unstructured.Unstructured{}
	u.SetGroupVersionKind(capi.ClusterGVK(capi.V1Beta2).GroupVersion().WithKind(kind))
	if err := e.Client.Get(t.Context(), client.ObjectKey{Namespace: ns, Name: name}, u); err != nil {
		t.Fatalf("reading %s %s/%s: %v", kind, ns, name, err)
	}
	return u
}

// markProvisioned reports, through the status subresource, what Cluster
// API's controllers report once the first control-plane node is up: the
// Cluster's infrastructure provisioned and control plane initialised, and
// each Machine's node. Move refuses to start without them.
func markProvisioned(t *testing.T, e *kubeenv.Env, cluster *unstructured.Unstructured, machines ...*unstructured.Unstructured) {
	t.Helper()
	cluster.Object["status"] = map[string]any{"initialization": map[string]any{"infrastructureProvisioned": true}}
	if err := e.Client.Status().Update(t.Context(), cluster); err != nil {
		t.Fatalf("reporting cluster %s/%s provisioned: %v", cluster.GetNamespace(), cluster.GetName(), err)
	}
	if err := kubeenv.SetInitialized(t.Context(), e.Client, cluster); err != nil {
		t.Fatal(err)
	}
	for _, m := range machines {
		m.Object["status"] = map[string]any{"nodeRef": map[string]any{"name": m.GetName()}}
		if err := e.Client.Status().Update(t.Context(), m); err != nil {
			t.Fatalf("reporting the node of machine %s/%s: %v", m.GetNamespace(), m.GetName(), err)
		}
	}
}

// heldLock builds, in namespace ns of the source, Cluster c1 whose control
// plane Machine cp-0 initialised and still holds the init lock, as a
// single-node cluster leaves it: the upstream provider releases the lock
// only when another Machine joins. With grant, cp-0 acquired the lock
// through initlock's Locker, which records the grant in the Cluster's grant
// register; without it, the lock is written as the upstream provider
// writes it, with no grant.
func heldLock(t *testing.T, ns string, grant bool) {
	t.Helper()
	ctx := t.Context()
	cluster := kubeenv.NewCluster(capi.V1Beta2, ns, clusterName)
	create(t, source, cluster)
	holder := newMachine(cluster, holderName)
	create(t, source, holder)
	if grant {
		res, err := initlock.New(source.Client).Lock(ctx, cluster, holder)
		if err != nil || !res.Acquired {
			t.Fatalf("cp-0 acquiring the lock: %+v, %v", res, err)
		}
	} else {
		create(t, source, kubeenv.NewLock(ns, clusterName, holderName, cluster))
	}
	// Lock wrote the grant register: read the Cluster again before its
	// status is written.
	cluster = get(t, source, "Cluster", ns, clusterName)
	holder = get(t, source, "Machine", ns, holderName)
	markProvisioned(t, source, cluster, holder)
}

// veleroRestore restores what a backup of namespace from holds into
// namespace to, as a Velero restore with a namespace mapping does, with the
// project's simulator of it (velerosim): ConfigMaps, then Machines, then
// Clusters, each with its metadata reset (no uid, resourceVersion, creation
// time or ownerReferences), without status and with the restore labels.
// Labels, annotations (the grant record among them) and data are kept.
func veleroRestore(t *testing.T, from, to string) {
	t.Helper()
	items, err := velerosim.Backup(t.Context(), source.Client, from,
		corev1.SchemeGroupVersion.WithKind("ConfigMap"), capi.MachineGVK(capi.V1Beta2), capi.ClusterGVK(capi.V1Beta2))
	if err != nil {
		t.Fatal(err)
	}
	velerosim.Restore(t, source.Config, velerosim.Options{NamespaceMapping: map[string]string{from: to}}, items...)
}

// reconcileAsClusterAPI does in namespace ns of the source what Cluster
// API's controllers do after a restore, since they do not run here: the
// machine controller gives each Machine back its Cluster ownerReference,
// and the Cluster and Machines report their status again. Nothing gives
// the lock its ownerReference back: upstream, no controller does.
func reconcileAsClusterAPI(t *testing.T, ns string) {
	t.Helper()
	cluster := get(t, source, "Cluster", ns, clusterName)
	holder := get(t, source, "Machine", ns, holderName)
	holder.SetOwnerReferences([]metav1.OwnerReference{clusterRef(cluster)})
	if err := source.Client.Update(t.Context(), holder); err != nil {
		t.Fatalf("giving machine %s/%s its cluster ownerReference back: %v", ns, holderName, err)
	}
	markProvisioned(t, source, cluster, holder)
}

// startManager runs initlock-manager against the source, watching
// namespace ns, until t ends. Release after init is off: the Cluster
// reports its control plane initialised (move needs it), and the test is
// about a lock still held at move time.
func startManager(t *testing.T, ns string) {
	t.Helper()
	opts := managertest.Options(ns)
	opts.ReleaseAfterInit = false
	opts.OrphanSettle = 0
	managertest.Start(t, source.Config, opts)
}

// ownedOnlyBy fails unless cm has exactly one ownerReference, to cluster's
// apiVersion and current UID (kubeenv.LockOwnedBy).
func ownedOnlyBy(cm *corev1.ConfigMap, cluster *unstructured.Unstructured) error {
	if len(cm.OwnerReferences) != 1 || cm.OwnerReferences[0].APIVersion != cluster.GetAPIVersion() {
		return fmt.Errorf("lock %s/%s has ownerReferences %v, want only %v", cm.Namespace, cm.Name, cm.OwnerReferences, clusterRef(cluster))
	}
	return kubeenv.LockOwnedBy(cm, cluster)
}

// holderOf returns the Machine cm's record names.
func holderOf(t *testing.T, cm *corev1.ConfigMap) string {
	t.Helper()
	rec, err := wire.DecodeRecord(cm.Data[wire.DataKey])
	if err != nil {
		t.Fatalf("lock %s/%s: %v", cm.Namespace, cm.Name, err)
	}
	return rec.MachineName
}

// leftInSource lists what namespace ns of the source still holds of the
// moved cluster: Clusters, Machines and ConfigMaps labelled for it.
func leftInSource(t *testing.T, ns string) []string {
	t.Helper()
	var out []string
	for _, kind := range []string{"Cluster", "Machine"} {
		list := &metav1.PartialObjectMetadataList{}
		list.SetGroupVersionKind(capi.ClusterGVK(capi.V1Beta2).GroupVersion().WithKind(kind + "List"))
		if err := source.Client.List(t.Context(), list, client.InNamespace(ns)); err != nil {
			t.Fatalf("listing %ss in %s: %v", kind, ns, err)
		}
		for _, i := range list.Items {
			out = append(out, kind+"/"+i.Name)
		}
	}
	cms := &corev1.ConfigMapList{}
	if err := source.Client.List(t.Context(), cms, client.InNamespace(ns), client.HasLabels{wire.ClusterNameLabel}); err != nil {
		t.Fatalf("listing configmaps in %s: %v", ns, err)
	}
	for _, i := range cms.Items {
		out = append(out, "ConfigMap/"+i.Name)
	}
	return out
}

// targetLocker is a Locker on the target whose requests are counted.
type targetLocker struct {
	*initlock.Locker
	counter *kubeenv.Counter
}

func newTargetLocker(t *testing.T) targetLocker {
	t.Helper()
	c := &kubeenv.Counter{}
	cl, err := client.New(c.CountingConfig(target.Config), client.Options{Scheme: kubeenv.Scheme()})
	if err != nil {
		t.Fatalf("building a client for the target: %v", err)
	}
	return targetLocker{Locker: initlock.New(cl), counter: c}
}

// lock calls Lock for machine name of cluster c1 in the target, as its
// bootstrap provider would, and returns the result with the number of
// writes it made.
func (l targetLocker) lock(t *testing.T, ns, name string) (initlock.Result, int) {
	t.Helper()
	cluster := get(t, target, "Cluster", ns, clusterName)
	machine := get(t, target, "Machine", ns, name)
	l.counter.Reset()
	res, err := l.Lock(t.Context(), cluster, machine)
	if err != nil {
		t.Fatalf("%s locking %s/%s: %v", name, ns, lockName, err)
	}
	return res, l.counter.Writes()
}
