package hardened_test

import (
	"slices"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/initlock/initlock/internal/kubeenv"
	"github.com/initlock/initlock/internal/relink"
)

// TestRestrictedRelinkAndAdoption restores a cluster's object graph, with
// Cluster API's controller references (blockOwnerDeletion set), and an
// unowned init lock, and runs the manager with the relinker as a user bound
// only to the generated ClusterRole: every object is relinked exactly as
// recorded, the lock is adopted, and no request is refused.
func TestRestrictedRelinkAndAdoption(t *testing.T) {
	ns := env.Namespace(t)
	cfg := restrictedUser(t, ns, installRules(t))

	create(t, kubeenv.NewLock(ns, "c1", "c1-cp-0", nil))
	create(t, restoredGraph(ns)...)
	create(t, kubeenv.NewMachine(env.CAPIVersion, ns, "c1", "c1-cp-0"))
	rm, _ := startManager(t, cfg, ns)
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("requests refused to the manager's user: %v", rm.Counter.Denied())
		}
	})
	cluster := restoredCluster(t, ns, "c1")

	kubeenv.Eventually(t, 30*time.Second, linkedTo(t, "MachineDeployment", ns, "md-0", cluster, plainOwner("Cluster", "c1")))
	kubeenv.Eventually(t, 30*time.Second, linkedTo(t, "MachineSet", ns, "md-0-abc", get(t, "MachineDeployment", ns, "md-0"), controllerOwner("MachineDeployment", "md-0")))
	kubeenv.Eventually(t, 30*time.Second, linkedTo(t, "Machine", ns, "md-0-abc-0", get(t, "MachineSet", ns, "md-0-abc"), controllerOwner("MachineSet", "md-0-abc")))
	kubeenv.Eventually(t, 30*time.Second, func() error {
		cm, err := kubeenv.GetLock(t.Context(), env.Client, ns, "c1")
		if err != nil {
			return err
		}
		return kubeenv.LockOwnedBy(cm, cluster)
	})
	if d := rm.Counter.Denied(); len(d) > 0 {
		t.Fatalf("requests refused to the manager's user: %v", d)
	}
}

// TestRoleGrantsOnlyTheNeededFinalizers checks that the opt-in ClusterRole
// of config/owner-references-enforcement grants update on the finalizers of
// exactly the owners that Cluster API gives blockOwnerDeletion references
// among the default relinked kinds, and nothing else on any finalizers, and
// that the default ClusterRole grants neither that nor delete on any Cluster
// API kind.
func TestRoleGrantsOnlyTheNeededFinalizers(t *testing.T) {
	for _, r := range kubeenv.GeneratedClusterRoleRules(t, "rbac") {
		for _, res := range r.Resources {
			if strings.HasSuffix(res, "/finalizers") || (slices.Contains(r.Verbs, "delete") && slices.Contains(r.APIGroups, "cluster.x-k8s.io")) {
				t.Errorf("the default ClusterRole grants %v on %s: only the overlay for OwnerReferencesPermissionEnforcement may", r.Verbs, res)
			}
		}
	}
	var got []string
	for _, r := range kubeenv.GeneratedClusterRoleRules(t, "owner-references-enforcement") {
		for _, res := range r.Resources {
			if !strings.HasSuffix(res, "/finalizers") {
				continue
			}
			if !slices.Equal(r.Verbs, []string{"update"}) {
				t.Errorf("%s: verbs %v, want only update", res, r.Verbs)
			}
			for _, g := range r.APIGroups {
				got = append(got, res+"."+g)
			}
		}
	}
	mapper := env.Client.RESTMapper()
	var want []string
	for _, gk := range relink.DefaultBlockingOwnerKinds() {
		m, err := mapper.RESTMapping(gk)
		if err != nil {
			t.Fatal(err)
		}
		want = append(want, m.Resource.Resource+"/finalizers."+gk.Group)
	}
	slices.Sort(got)
	slices.Sort(want)
	if !slices.Equal(got, want) {
		t.Fatalf("finalizers granted = %v, want %v", got, want)
	}
	wantKinds := []schema.GroupKind{{Group: "cluster.x-k8s.io", Kind: "MachineDeployment"},
		{Group: "cluster.x-k8s.io", Kind: "MachinePool"}, {Group: "cluster.x-k8s.io", Kind: "MachineSet"}}
	if got := relink.DefaultBlockingOwnerKinds(); !slices.Equal(got, wantKinds) {
		t.Fatalf("DefaultBlockingOwnerKinds() = %v, want %v", got, wantKinds)
	}
}
