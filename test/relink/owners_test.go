package relinksuite

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
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/initlock/initlock/internal/kubeenv"
	"github.com/initlock/initlock/internal/kubeenv/velerosim"
	"github.com/initlock/initlock/internal/relink"
	"github.com/initlock/initlock/pkg/initlock/capi"
)

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
// owns: a user's object, which no Cluster API controller adopts.
func clusterWithAddOn(t *testing.T, ns string) (*unstructured.Unstructured, *corev1.ConfigMap) {
	t.Helper()
	c1 := create(t, kubeenv.NewCluster(env.CAPIVersion, ns, "c1"))
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "c1-addons",
		Labels:          map[string]string{capi.ClusterNameLabel: "c1"},
		OwnerReferences: []metav1.OwnerReference{refTo(c1, false)}},
		Data: map[string]string{"addons": "cni"}}
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
	md = machineGroup("MachineDeployment", ns, "c1", "c1-md-0")
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
	if cluster2.GetKind() != "Cluster" || cluster2.GetUID() == cluster1.GetUID() {
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
