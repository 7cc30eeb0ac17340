package relink_test

import (
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	velerov1 "github.com/vmware-tanzu/velero/pkg/apis/velero/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	testingclock "k8s.io/utils/clock/testing"
	"sigs.k8s.io/controller-runtime/pkg/client"
	ctrlmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"

	"github.com/initlock/initlock/internal/kubeenv"
	"github.com/initlock/initlock/internal/kubeenv/velerosim"
	"github.com/initlock/initlock/internal/relink"
	"github.com/initlock/initlock/pkg/initlock/capi"
)

// addOn is a user's ConfigMap of Cluster cluster, owned by it: an object no
// Cluster API controller adopts.
func addOn(ns, name string, cluster *unstructured.Unstructured) *corev1.ConfigMap {
	return &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name,
		Labels:          map[string]string{capi.ClusterNameLabel: cluster.GetName()},
		OwnerReferences: []metav1.OwnerReference{refTo(cluster, false)}},
		Data: map[string]string{"addons": "cni"}}
}

// backupOf backs up the Clusters, MachineDeployments and ConfigMaps of ns.
func backupOf(t *testing.T, ns string) []*unstructured.Unstructured {
	t.Helper()
	items, err := velerosim.Backup(t.Context(), env.Client, ns, capiGVK("Cluster"), capiGVK("MachineDeployment"), configMapGVK)
	if err != nil {
		t.Fatal(err)
	}
	return items
}

// restoreAs restores items as the Velero restore named name does, with
// initlock's plugin, skipping the objects that exist (Velero's default)
// unless opts says otherwise.
func restoreAs(t *testing.T, name string, opts velerosim.Options, items []*unstructured.Unstructured) []*unstructured.Unstructured {
	t.Helper()
	opts.Actions, opts.RestoreName = pluginActions(), name
	if opts.ExistingResourcePolicy == "" {
		opts.ExistingResourcePolicy = velerov1.PolicyTypeNone
	}
	return velerosim.Restore(t, env.Config, opts, items...)
}

// deleteAndWait deletes obj and waits until the garbage collector has
// deleted the dependents given.
func deleteAndWait(t *testing.T, obj client.Object, dependents ...client.Object) {
	t.Helper()
	kubeenv.DeleteAndWait(t, env.Client, obj)
	kubeenv.WaitGone(t, env.Client, dependents...)
}

// objKey names an object of the test's namespace.
type objKey struct {
	gvk  schema.GroupVersionKind
	name string
}

// unlinkedAndKept returns nil while every object of keys exists in ns
// without an ownerReference.
func unlinkedAndKept(t *testing.T, ns string, keys ...objKey) func() error {
	return func() error {
		for _, k := range keys {
			if refs := get(t, k.gvk, ns, k.name).GetOwnerReferences(); len(refs) > 0 {
				return fmt.Errorf("%s %s linked to %v", k.gvk.Kind, k.name, refs)
			}
		}
		return nil
	}
}

// clusterWithAddOn creates in ns Cluster c1 and an add-on ConfigMap it
// owns.
func clusterWithAddOn(t *testing.T, ns string) (*unstructured.Unstructured, *corev1.ConfigMap) {
	t.Helper()
	c1 := create(t, kubeenv.NewCluster(env.CAPIVersion, ns, "c1"))
	cm := addOn(ns, "c1-addons", c1)
	if err := env.Client.Create(t.Context(), cm); err != nil {
		t.Fatal(err)
	}
	return c1, cm
}

// graphOf creates in ns Cluster c1, a MachineDeployment and an add-on
// ConfigMap it owns, and returns them.
func graphOf(t *testing.T, ns string) (c1, md *unstructured.Unstructured, cm *corev1.ConfigMap) {
	t.Helper()
	c1, cm = clusterWithAddOn(t, ns)
	md = newMachineDeployment(ns, "c1", "c1-md-0")
	md.SetOwnerReferences([]metav1.OwnerReference{refTo(c1, false)})
	create(t, md)
	return c1, md, cm
}

// configMapsOf keeps the ConfigMaps of a backup: what a restore of the
// ConfigMaps alone brings back.
func configMapsOf(items []*unstructured.Unstructured) []*unstructured.Unstructured {
	var out []*unstructured.Unstructured
	for _, u := range items {
		if u.GetKind() == "ConfigMap" {
			out = append(out, u)
		}
	}
	return out
}

// TestPartialRestoreNeverLinksToAnUnrelatedOwner: a backup holds Cluster c1,
// its MachineDeployment and an add-on ConfigMap it owns. The operator has
// since deleted c1 and created an unrelated Cluster c1 in the namespace; the
// restore skips the Cluster (one of that name exists) and restores the
// other two. Neither may be linked to the new c1: deleting it would have
// the garbage collector delete them.
func TestPartialRestoreNeverLinksToAnUnrelatedOwner(t *testing.T) {
	ns := env.Namespace(t)
	c1, md, cm := graphOf(t, ns)
	items := backupOf(t, ns)

	h := start(t, ns, relink.Options{WarnAfter: -1})
	deleteAndWait(t, c1, md, cm)
	unrelated := kubeenv.NewCluster(env.CAPIVersion, ns, "c1")
	unrelated.SetLabels(map[string]string{"team": "someone-else"})
	create(t, unrelated)

	restored := restoreAs(t, "restore-1", velerosim.Options{}, items)
	if len(restored) != 2 {
		t.Fatalf("restored %d objects, want the MachineDeployment and the ConfigMap", len(restored))
	}
	left := unlinkedAndKept(t, ns, objKey{capiGVK("MachineDeployment"), "c1-md-0"}, objKey{configMapGVK, "c1-addons"})
	kubeenv.Consistently(t, 3*time.Second, left)
	kubeenv.Eventually(t, 10*time.Second, func() error {
		if w := h.relinker.Waiting(); len(w) != 2 {
			return fmt.Errorf("waiting: %v", w)
		}
		return nil
	})
	if w := h.objectWrites(); w != 0 {
		t.Fatalf("%d writes:\n%s", w, h.rm.Counter)
	}
	for _, gk := range []schema.GroupKind{configMapGK, capiGVK("MachineDeployment").GroupKind()} {
		if got := h.metric(t, relink.UnprovenMetric, gk); got != 1 {
			t.Errorf("%s{%s} = %v, want 1", relink.UnprovenMetric, gk, got)
		}
	}
	kubeenv.Eventually(t, 10*time.Second, func() error {
		got := events(t, ns, "c1-addons")
		if len(got) != 1 || !strings.Contains(got[0], relink.ReasonOwnerNotProven+": Owner Cluster") || !strings.Contains(got[0], "was not restored by restore restore-1") {
			return fmt.Errorf("events = %v", got)
		}
		return nil
	})
	// The unrelated Cluster goes: what the restore brought back stays.
	kubeenv.DeleteAndWait(t, env.Client, unrelated)
	kubeenv.Consistently(t, 2*time.Second, left)
}

// isClusterWatch tells whether req watches Cluster API Clusters.
func isClusterWatch(req *http.Request) bool {
	return strings.Contains(req.URL.Path, "/apis/"+capi.Group+"/") && strings.HasSuffix(req.URL.Path, "/clusters")
}

// TestLaggingCacheNeverLinksToADeletedOwner: the same backup restored twice.
// The first restore is relinked; the operator deletes c1, and the garbage
// collector takes that restore's ConfigMap with it; the backup is restored
// again while the relinker's watch of Clusters still shows the first c1.
// The second restore's ConfigMap must be linked to the second c1, never to
// the deleted one's UID (the collector would delete it).
func TestLaggingCacheNeverLinksToADeletedOwner(t *testing.T) {
	ns := env.Namespace(t)
	c1, cm := clusterWithAddOn(t, ns)
	items := backupOf(t, ns)
	deleteAndWait(t, c1, cm)

	const lag = 4 * time.Second
	startAs(t, kubeenv.LagWatches(env.Config, lag, isClusterWatch), ns, relink.Options{})
	first := restoreAs(t, "restore-1", velerosim.Options{}, items)
	cluster1 := first[len(first)-1]
	kubeenv.Eventually(t, 3*lag, linked(t, configMapGVK, ns, "c1-addons", refTo(cluster1, false)))

	deleteAndWait(t, cluster1, cm)
	second := restoreAs(t, "restore-2", velerosim.Options{}, items)
	cluster2 := second[len(second)-1]
	if cluster2.GetKind() != capi.ClusterKind || cluster2.GetUID() == cluster1.GetUID() {
		t.Fatalf("the second restore made %s %s", cluster2.GetKind(), cluster2.GetUID())
	}
	kubeenv.Eventually(t, 3*lag, linked(t, configMapGVK, ns, "c1-addons", refTo(cluster2, false)))
}

// TestOwnerIsConfirmedLive: a restore brings back a ConfigMap lost alone,
// whose Cluster was never deleted, just as the operator deletes that
// Cluster; the relinker's watch of Clusters still shows it. The cache
// proves nothing: the owner is read live, found gone, and the ConfigMap
// waits unlinked instead of being linked to a UID the garbage collector
// knows to be gone.
func TestOwnerIsConfirmedLive(t *testing.T) {
	ns := env.Namespace(t)
	c1, cm := clusterWithAddOn(t, ns)
	lost := configMapsOf(backupOf(t, ns))
	kubeenv.DeleteAndWait(t, env.Client, cm)

	const lag = 3 * time.Second
	startAs(t, kubeenv.LagWatches(env.Config, lag, isClusterWatch), ns, relink.Options{})
	kubeenv.DeleteAndWait(t, env.Client, c1)
	restoreAs(t, "restore-1", velerosim.Options{}, lost)
	kubeenv.Consistently(t, lag+2*time.Second, unlinkedAndKept(t, ns, objKey{configMapGVK, "c1-addons"}))
}

// TestNamespaceMappings: a backup restored with --namespace-mappings into a
// namespace of its own is linked to the owners restored there, while the
// backed-up namespace keeps its objects; restored into a namespace where an
// unrelated Cluster c1 exists, it stays unlinked.
func TestNamespaceMappings(t *testing.T) {
	from := env.Namespace(t)
	c1, md, cm := graphOf(t, from)
	items := backupOf(t, from)
	to, taken := env.Namespace(t), env.Namespace(t)
	create(t, kubeenv.NewCluster(env.CAPIVersion, taken, "c1"))
	start(t, to, relink.Options{})
	hTaken := start(t, taken, relink.Options{WarnAfter: -1})

	restoreAs(t, "restore-to", velerosim.Options{NamespaceMapping: map[string]string{from: to}}, items)
	restoreAs(t, "restore-taken", velerosim.Options{NamespaceMapping: map[string]string{from: taken}}, items)
	restoredC1 := get(t, capiGVK("Cluster"), to, "c1")
	kubeenv.Eventually(t, 10*time.Second, linked(t, capiGVK("MachineDeployment"), to, "c1-md-0", refTo(restoredC1, false)))
	kubeenv.Eventually(t, 10*time.Second, linked(t, configMapGVK, to, "c1-addons", refTo(restoredC1, false)))
	kubeenv.Consistently(t, 2*time.Second, unlinkedAndKept(t, taken, objKey{capiGVK("MachineDeployment"), "c1-md-0"}, objKey{configMapGVK, "c1-addons"}))
	if got := hTaken.metric(t, relink.UnprovenMetric, configMapGK); got != 1 {
		t.Errorf("%s{ConfigMap} = %v, want 1", relink.UnprovenMetric, got)
	}
	// The backed-up objects are as they were.
	if refs := get(t, capiGVK("MachineDeployment"), from, md.GetName()).GetOwnerReferences(); !equalRefs(refs, []metav1.OwnerReference{refTo(c1, false)}) {
		t.Errorf("the backed-up MachineDeployment's ownerReferences = %v", refs)
	}
	if refs := get(t, configMapGVK, from, cm.Name).GetOwnerReferences(); !equalRefs(refs, []metav1.OwnerReference{refTo(c1, false)}) {
		t.Errorf("the backed-up ConfigMap's ownerReferences = %v", refs)
	}
}

// TestExistingResourcePolicyUpdate: with --existing-resource-policy=update
// Velero patches an existing object towards the backed-up one and labels it
// with the restore. An unrelated Cluster that took c1's name so becomes the
// restored c1, and the add-on restored with it is linked to it; an add-on
// that was never lost keeps its reference to the original c1 and loses
// only the annotation, in one patch.
func TestExistingResourcePolicyUpdate(t *testing.T) {
	update := velerosim.Options{ExistingResourcePolicy: velerov1.PolicyTypeUpdate}
	t.Run("owner taken by an unrelated object", func(t *testing.T) {
		ns := env.Namespace(t)
		c1, _, cm := graphOf(t, ns)
		items := backupOf(t, ns)
		deleteAndWait(t, c1, cm)
		unrelated := kubeenv.NewCluster(env.CAPIVersion, ns, "c1")
		unrelated.SetLabels(map[string]string{"team": "someone-else"})
		create(t, unrelated)
		start(t, ns, relink.Options{})

		restoreAs(t, "restore-update", update, items)
		updated := get(t, capiGVK("Cluster"), ns, "c1")
		if updated.GetUID() != unrelated.GetUID() || updated.GetLabels()[velerov1.RestoreNameLabel] != "restore-update" {
			t.Fatalf("the restore did not update the existing Cluster: UID %s, labels %v", updated.GetUID(), updated.GetLabels())
		}
		kubeenv.Eventually(t, 10*time.Second, linked(t, configMapGVK, ns, "c1-addons", refTo(updated, false)))
		kubeenv.Eventually(t, 10*time.Second, linked(t, capiGVK("MachineDeployment"), ns, "c1-md-0", refTo(updated, false)))
	})
	t.Run("nothing lost", func(t *testing.T) {
		ns := env.Namespace(t)
		c1, _, _ := graphOf(t, ns)
		items := backupOf(t, ns)
		h := start(t, ns, relink.Options{})

		restoreAs(t, "restore-update", update, items)
		if v := get(t, configMapGVK, ns, "c1-addons").GetAnnotations()[relink.Annotation]; v == "" {
			t.Fatal("the restore did not annotate the existing ConfigMap")
		}
		kubeenv.Eventually(t, 10*time.Second, linked(t, configMapGVK, ns, "c1-addons", refTo(c1, false)))
		kubeenv.Eventually(t, 10*time.Second, linked(t, capiGVK("MachineDeployment"), ns, "c1-md-0", refTo(c1, false)))
		kubeenv.Consistently(t, time.Second, func() error { return nil })
		want := map[string]int{
			"/v1 configmaps " + ns + "/c1-addons":                                            1,
			"cluster.x-k8s.io/" + env.CAPIVersion + " machinedeployments " + ns + "/c1-md-0": 1,
		}
		if got := h.patchesPerObject(t); fmt.Sprint(got) != fmt.Sprint(want) {
			t.Fatalf("patches = %v, want %v", got, want)
		}
	})
}

// TestPartialRestoreOfLostDependents: an add-on ConfigMap is lost alone and
// restored from a backup; its Cluster, never deleted, is the one the
// annotation recorded by UID: it is linked. The same object restored from a
// backup whose annotation has the first format, without UIDs, proves
// nothing: it waits, with a Warning event and the unproven gauge.
func TestPartialRestoreOfLostDependents(t *testing.T) {
	ns := env.Namespace(t)
	c1, _, cm := graphOf(t, ns)
	lost := configMapsOf(backupOf(t, ns))
	kubeenv.DeleteAndWait(t, env.Client, cm)
	h := start(t, ns, relink.Options{WarnAfter: -1})

	restoreAs(t, "restore-1", velerosim.Options{}, lost)
	kubeenv.Eventually(t, 10*time.Second, linked(t, configMapGVK, ns, "c1-addons", refTo(c1, false)))

	old := restoredConfigMap(t, ns, "first-format", "c1")
	old.SetAnnotations(map[string]string{relink.Annotation: `[{"apiVersion":"` + c1.GetAPIVersion() + `","kind":"Cluster","name":"c1"}]`})
	create(t, old)
	kubeenv.Eventually(t, 10*time.Second, func() error {
		got := events(t, ns, "first-format")
		if len(got) != 1 || !strings.HasPrefix(got[0], "Warning "+relink.ReasonOwnerNotProven+": Owner Cluster "+c1.GetAPIVersion()+" c1 exists with UID "+string(c1.GetUID())) {
			return fmt.Errorf("events = %v", got)
		}
		return nil
	})
	if got := h.metric(t, relink.UnprovenMetric, configMapGK); got != 1 {
		t.Errorf("%s{ConfigMap} = %v, want 1", relink.UnprovenMetric, got)
	}
	kubeenv.Consistently(t, time.Second, unlinkedAndKept(t, ns, objKey{configMapGVK, "first-format"}))
}

// reconciles returns how many reconciles the relink controllers of the
// process have made.
func reconciles(t *testing.T) float64 {
	t.Helper()
	n, _ := metricValue(t, ctrlmetrics.Registry, "controller_runtime_reconcile_total", map[string]string{"controller": relink.ControllerName})
	return n
}

// TestUnknownKindsAskDiscoveryOncePerRetryPeriod: an object whose
// annotation names 2,000 kinds the API server does not serve is looked at
// again and again while it waits; the relinker asks the API server's
// discovery about them once per DiscoveryRetry (two requests, /api and
// /apis), not on every retry, and reads nothing else.
func TestUnknownKindsAskDiscoveryOncePerRetryPeriod(t *testing.T) {
	ns := env.Namespace(t)
	clock := testingclock.NewFakeClock(time.Now())
	h := start(t, ns, relink.Options{Clock: clock, MinBackoff: 10 * time.Millisecond, MaxBackoff: 50 * time.Millisecond})
	owners := make([]relink.OwnerRef, 2000)
	for i := range owners {
		owners[i] = relink.OwnerRef{APIVersion: fmt.Sprintf("g%02d.example.invalid/v1", i%100), Kind: fmt.Sprintf("Kind%04d", i), Name: "o"}
	}
	h.rm.Counter.Reset()
	create(t, restoredConfigMap(t, ns, "many-kinds", "c1", owners...))

	retries := func(n float64) {
		t.Helper()
		base := reconciles(t)
		kubeenv.Eventually(t, 30*time.Second, func() error {
			if got := reconciles(t) - base; got < n {
				return fmt.Errorf("%v reconciles", got)
			}
			return nil
		})
	}
	retries(10)
	if n, all := h.rm.Counter.Count("discovery"), h.rm.Counter.Count("get", "list", "discovery"); n != 0 || all != 0 {
		t.Fatalf("%d discovery requests and %d reads within DiscoveryRetry of the start, want none:\n%s", n, all, h.rm.Counter)
	}
	clock.Step(relink.DiscoveryRetry)
	retries(10)
	if n, all := h.rm.Counter.Count("discovery"), h.rm.Counter.Count("get", "list", "discovery"); n != 2 || all != 2 {
		t.Fatalf("%d discovery requests and %d reads after DiscoveryRetry, want one snapshot (2 requests) and nothing else:\n%s", n, all, h.rm.Counter)
	}
	if w := h.relinker.Waiting(); len(w) != 1 {
		t.Fatalf("waiting = %v", w)
	}
}

// TestOwnerReadsAreBatched: 200 restored ConfigMaps wait for their Cluster;
// once it is restored, each is linked after a live read of the Cluster,
// but they share the reads: at most one per ConfirmFor. A ConfigMap first
// seen after the last read is linked only after a read of its own.
func TestOwnerReadsAreBatched(t *testing.T) {
	ns := env.Namespace(t)
	h := start(t, ns, relink.Options{MinBackoff: time.Hour})
	const n = 200
	for i := range n {
		create(t, restoredConfigMap(t, ns, fmt.Sprintf("cm-%03d", i), "c1", clusterOwner("c1")))
	}
	kubeenv.Eventually(t, 30*time.Second, func() error {
		if got := h.metric(t, relink.WaitingMetric, configMapGK); got != n {
			return fmt.Errorf("%v waiting", got)
		}
		return nil
	})
	h.rm.Counter.Reset()
	began := time.Now()
	cluster := create(t, restored(t, kubeenv.NewCluster(env.CAPIVersion, ns, "c1")))
	kubeenv.Eventually(t, 30*time.Second, func() error {
		if got := h.metric(t, relink.LinkedMetric, configMapGK); got != n {
			return fmt.Errorf("%v linked", got)
		}
		return nil
	})
	elapsed := time.Since(began)
	reads := h.rm.Counter.Of("clusters", ns).Count("get")
	if most := 1 + int(elapsed/relink.ConfirmFor); reads < 1 || reads > most {
		t.Fatalf("%d live reads of the Cluster for %d ConfigMaps in %s, want 1 to %d", reads, n, elapsed, most)
	}
	t.Logf("%d ConfigMaps linked in %s with %d live reads of their Cluster", n, elapsed.Round(time.Millisecond), reads)

	create(t, restoredConfigMap(t, ns, "late", "c1", clusterOwner("c1")))
	kubeenv.Eventually(t, 10*time.Second, linked(t, configMapGVK, ns, "late", refTo(cluster, false)))
	if got := h.rm.Counter.Of("clusters", ns).Count("get") - reads; got != 1 {
		t.Fatalf("%d live reads for a ConfigMap first seen after the last read, want 1", got)
	}
}
