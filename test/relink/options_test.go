package relinksuite

import (
	"fmt"
	"strings"
	"testing"
	"time"

	velerov1 "github.com/vmware-tanzu/velero/pkg/apis/velero/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/initlock/initlock/internal/kubeenv"
	"github.com/initlock/initlock/internal/kubeenv/velerosim"
	"github.com/initlock/initlock/internal/relink"
)

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
		// The restore annotates the existing add-on, and the relinker may
		// take the annotation off before a read here: its one patch of the
		// add-on, counted below, is that.
		kubeenv.Eventually(t, 10*time.Second, func() error {
			if v := get(t, configMapGVK, ns, "c1-addons").GetAnnotations()[relink.Annotation]; v != "" {
				return fmt.Errorf("the add-on still carries %s", relink.Annotation)
			}
			return nil
		})
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
