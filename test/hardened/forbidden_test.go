package hardened_test

import (
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	rbacv1 "k8s.io/api/rbac/v1"

	"github.com/initlock/initlock/internal/kubeenv"
	"github.com/initlock/initlock/internal/relink"
	"github.com/initlock/initlock/test/managertest"
)

// TestMissingPermission runs the manager with the generated ClusterRole
// less one permission the relinker needs for a Machine controlled by a
// MachineSet: update on machinesets/finalizers, delete on machines (both
// required by the admission plugin), or patch on machines (by RBAC). Every
// other object is relinked; the Machine is left untouched, with a Warning
// event naming the permission and a count in the forbidden metric, and it is
// relinked once the permission is granted.
func TestMissingPermission(t *testing.T) {
	for _, tc := range []struct{ resource, verb string }{
		{"machinesets/finalizers", "update"},
		{"machines", "delete"},
		{"machines", "patch"},
	} {
		t.Run(tc.verb+" "+tc.resource, func(t *testing.T) { testMissingPermission(t, tc.resource, tc.verb) })
	}
}

func testMissingPermission(t *testing.T, resource, verb string) {
	ns := env.Namespace(t)
	rules := without(installRules(t), resource, verb)
	cfg := restrictedUser(t, ns, rules)

	create(t, restoredGraph(ns)...)
	rm, reg := startManager(t, cfg, ns)
	cluster := restoredCluster(t, ns, "c1")

	kubeenv.Eventually(t, 30*time.Second, linkedTo(t, "MachineDeployment", ns, "md-0", cluster, plainOwner("Cluster", "c1")))
	kubeenv.Eventually(t, 30*time.Second, linkedTo(t, "MachineSet", ns, "md-0-abc", get(t, "MachineDeployment", ns, "md-0"), controllerOwner("MachineDeployment", "md-0")))
	ev := managertest.EventOn(t, env.Client, ns, relink.ReasonRelinkForbidden, "Machine", "md-0-abc-0")
	if want := "lacks permission to " + verb + " " + resource + " in group cluster.x-k8s.io;"; !strings.Contains(ev.Note, want) || ev.Type != "Warning" {
		t.Fatalf("event %s %q, want a Warning containing %q", ev.Type, ev.Note, want)
	}
	// Nothing written: the Machine keeps its annotation and has no owner.
	got := get(t, "Machine", ns, "md-0-abc-0")
	if _, ok := got.GetAnnotations()[relink.Annotation]; !ok || len(got.GetOwnerReferences()) > 0 {
		t.Fatalf("Machine half relinked: annotations %v, ownerReferences %v", got.GetAnnotations(), got.GetOwnerReferences())
	}
	if n := forbiddenCount(t, reg, "Machine"); n < 1 {
		t.Fatalf("%s{Machine} = %v, want at least 1", relink.ForbiddenMetric, n)
	}
	if n := forbiddenCount(t, reg, "MachineSet") + forbiddenCount(t, reg, "MachineDeployment"); n != 0 {
		t.Fatalf("%s for MachineSet and MachineDeployment = %v, want 0", relink.ForbiddenMetric, n)
	}
	for _, d := range rm.Counter.Denied() {
		if !strings.Contains(d, "/machines/md-0-abc-0") {
			t.Errorf("unexpected refused request: %s", d)
		}
	}

	// Granted: relinked on the next retry.
	env.BindClusterRole(t, "granted-"+ns, []rbacv1.PolicyRule{{
		APIGroups: []string{"cluster.x-k8s.io"}, Resources: []string{resource}, Verbs: []string{verb},
	}}, kubeenv.UserSubject("initlock-"+ns))
	kubeenv.Eventually(t, 30*time.Second, linkedTo(t, "Machine", ns, "md-0-abc-0", get(t, "MachineSet", ns, "md-0-abc"), controllerOwner("MachineSet", "md-0-abc")))
}

// forbiddenCount reads the forbidden metric of the relinker for a Cluster
// API kind.
func forbiddenCount(t *testing.T, reg prometheus.Gatherer, kind string) float64 {
	t.Helper()
	families, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range families {
		if f.GetName() != relink.ForbiddenMetric {
			continue
		}
		for _, m := range f.GetMetric() {
			labels := map[string]string{}
			for _, l := range m.GetLabel() {
				labels[l.GetName()] = l.GetValue()
			}
			if labels["group"] == "cluster.x-k8s.io" && labels["kind"] == kind {
				return m.GetCounter().GetValue()
			}
		}
	}
	t.Fatalf("no metric %s for %s", relink.ForbiddenMetric, kind)
	return 0
}

// without returns rules less verb on the cluster.x-k8s.io resource: a rule
// that grants it is split so that its other resources and verbs stay.
func without(rules []rbacv1.PolicyRule, resource, verb string) []rbacv1.PolicyRule {
	var out []rbacv1.PolicyRule
	for _, r := range rules {
		if !slices.Contains(r.APIGroups, "cluster.x-k8s.io") || !slices.Contains(r.Resources, resource) || !slices.Contains(r.Verbs, verb) {
			out = append(out, r)
			continue
		}
		if others := slices.DeleteFunc(slices.Clone(r.Resources), func(x string) bool { return x == resource }); len(others) > 0 {
			rest := *r.DeepCopy()
			rest.Resources = others
			out = append(out, rest)
		}
		if verbs := slices.DeleteFunc(slices.Clone(r.Verbs), func(x string) bool { return x == verb }); len(verbs) > 0 {
			out = append(out, rbacv1.PolicyRule{APIGroups: r.APIGroups, Resources: []string{resource}, Verbs: verbs})
		}
	}
	return out
}
