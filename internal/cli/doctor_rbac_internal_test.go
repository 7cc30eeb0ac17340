package cli

import (
	"errors"
	"path/filepath"
	"reflect"
	"slices"
	"testing"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/initlock/initlock/internal/kubeenv"
	"github.com/initlock/initlock/internal/manager"
)

// The rules doctor wants are those of the files the binary embeds, read
// as kubectl reads them, and the Lease it looks for is the manager's
// default.
func TestShippedRulesAreTheConfig(t *testing.T) {
	root, err := kubeenv.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	sh := mustShipped(t)
	for _, tc := range []struct {
		file, kind string
		got        []rbacv1.PolicyRule
	}{
		{"config/rbac/role.yaml", "ClusterRole", sh.cluster},
		{"config/rbac/role.yaml", "Role", sh.namespace},
		{"config/relink-secrets/role.yaml", "ClusterRole", sh.relinkSecrets},
	} {
		objs, err := kubeenv.ReadObjects(filepath.Join(root, tc.file))
		if err != nil {
			t.Fatal(err)
		}
		i := slices.IndexFunc(objs, func(o *unstructured.Unstructured) bool { return o.GetKind() == tc.kind })
		if i < 0 {
			t.Fatalf("%s has no %s", tc.file, tc.kind)
		}
		var role rbacv1.ClusterRole
		if err := runtime.DefaultUnstructuredConverter.FromUnstructured(objs[i].Object, &role); err != nil {
			t.Fatal(err)
		}
		if len(tc.got) == 0 || !reflect.DeepEqual(role.Rules, tc.got) {
			t.Errorf("the %s of %s has rules\n%+v\ndoctor wants\n%+v", tc.kind, tc.file, role.Rules, tc.got)
		}
	}
	if defaultLeaderElectionID != manager.DefaultLeaderElectionID {
		t.Errorf("doctor looks for the Lease %q, the manager's default is %q", defaultLeaderElectionID, manager.DefaultLeaderElectionID)
	}
}

func mustShipped(t *testing.T) shippedRules {
	t.Helper()
	sh, err := shipped()
	if err != nil {
		t.Fatal(err)
	}
	return sh
}

func TestReadManagerFlags(t *testing.T) {
	for _, tc := range []struct {
		name string
		args []string
		want managerFlags
	}{
		{"shipped", []string{"--leader-elect", "--metrics-bind-address=:8443"}, managerFlags{leaderElect: true}},
		{"none", nil, managerFlags{}},
		{"every form", []string{"-leader-elect=true", "--leader-election-id", "my-id", "-leader-election-namespace=kube-system", "--relink-secrets", "--", "--leader-elect=false"},
			managerFlags{leaderElect: true, leaderElectionID: "my-id", leaderElectionNamespace: "kube-system", relinkSecrets: true}},
		{"turned off", []string{"--leader-elect", "--leader-elect=false", "--relink-secrets=false"}, managerFlags{}},
	} {
		containers := []corev1.Container{{Name: "sidecar", Args: []string{"--leader-elect"}}, {Name: "manager", Command: []string{"/initlock-manager"}, Args: tc.args}}
		if got := readManagerFlags(containers); got != tc.want {
			t.Errorf("%s: %+v, want %+v", tc.name, got, tc.want)
		}
	}
}

// A rule covers a verb on a resource when its groups, resources and verbs
// hold them or "*", and it names no resourceNames.
func TestMissingRules(t *testing.T) {
	want := []rbacv1.PolicyRule{
		{APIGroups: []string{""}, Resources: []string{"configmaps"}, Verbs: []string{"get", "delete"}},
		{APIGroups: []string{"cluster.x-k8s.io"}, Resources: []string{"clusters", "machines"}, Verbs: []string{"watch"}},
	}
	for _, tc := range []struct {
		name    string
		granted []rbacv1.PolicyRule
		missing []string
	}{
		{"nothing", nil, []string{"get configmaps", "delete configmaps", "watch clusters.cluster.x-k8s.io", "watch machines.cluster.x-k8s.io"}},
		{"everything", []rbacv1.PolicyRule{{APIGroups: []string{"*"}, Resources: []string{"*"}, Verbs: []string{"*"}}}, nil},
		{"split over rules", []rbacv1.PolicyRule{
			{APIGroups: []string{""}, Resources: []string{"configmaps"}, Verbs: []string{"get"}},
			{APIGroups: []string{"", "apps"}, Resources: []string{"configmaps", "deployments"}, Verbs: []string{"delete", "list"}},
			{APIGroups: []string{"cluster.x-k8s.io"}, Resources: []string{"*"}, Verbs: []string{"get", "list", "watch"}},
		}, nil},
		{"by name only", []rbacv1.PolicyRule{
			{APIGroups: []string{""}, Resources: []string{"configmaps"}, Verbs: []string{"*"}, ResourceNames: []string{"c1-lock"}},
			{APIGroups: []string{"cluster.x-k8s.io"}, Resources: []string{"clusters"}, Verbs: []string{"watch"}},
		}, []string{"get configmaps", "delete configmaps", "watch machines.cluster.x-k8s.io"}},
		{"other group", []rbacv1.PolicyRule{{APIGroups: []string{"apps"}, Resources: []string{"*"}, Verbs: []string{"*"}}},
			[]string{"get configmaps", "delete configmaps", "watch clusters.cluster.x-k8s.io", "watch machines.cluster.x-k8s.io"}},
	} {
		if got := missingRules(want, tc.granted); !slices.Equal(got, tc.missing) {
			t.Errorf("%s: missing %q, want %q", tc.name, got, tc.missing)
		}
	}
}

func TestBindsAccount(t *testing.T) {
	sa := func(ns, name string) rbacv1.Subject {
		return rbacv1.Subject{Kind: rbacv1.ServiceAccountKind, Namespace: ns, Name: name}
	}
	group := func(name string) rbacv1.Subject { return rbacv1.Subject{Kind: rbacv1.GroupKind, Name: name} }
	for _, tc := range []struct {
		subjects []rbacv1.Subject
		want     bool
	}{
		{[]rbacv1.Subject{sa("sys", "mgr")}, true},
		{[]rbacv1.Subject{sa("other", "mgr"), sa("sys", "other")}, false},
		{[]rbacv1.Subject{{Kind: rbacv1.UserKind, Name: "mgr"}}, false},
		{[]rbacv1.Subject{group("system:serviceaccounts:sys")}, true},
		{[]rbacv1.Subject{group("system:serviceaccounts:other")}, false},
		{[]rbacv1.Subject{group("system:serviceaccounts")}, true},
		{[]rbacv1.Subject{group("system:authenticated")}, true},
		{nil, false},
	} {
		if got := bindsAccount(tc.subjects, "sys", "mgr"); got != tc.want {
			t.Errorf("bindsAccount(%+v) = %t", tc.subjects, got)
		}
	}
}

// The rules of the ClusterRole must be granted in every namespace, those
// of the Role in the manager's; --relink-secrets adds its ClusterRole's.
func TestJudgeRBAC(t *testing.T) {
	sh := mustShipped(t)
	noDelete := slices.Clone(sh.cluster)
	noDelete[0].Verbs = []string{"get", "list", "patch", "watch"}
	for _, tc := range []struct {
		name string
		f    rbacFacts
		want DoctorCheck
	}{
		{"as shipped", rbacFacts{clusterRules: sh.cluster, namespaceRules: sh.namespace},
			DoctorCheck{Status: CheckOK, Detail: "ServiceAccount sys/mgr is granted every rule of config/rbac"}},
		{"a cluster-admin", rbacFacts{clusterRules: []rbacv1.PolicyRule{{APIGroups: []string{"*"}, Resources: []string{"*"}, Verbs: []string{"*"}}}},
			DoctorCheck{Status: CheckOK, Detail: "ServiceAccount sys/mgr is granted every rule of config/rbac"}},
		{"a verb and the Role missing", rbacFacts{clusterRules: noDelete}, DoctorCheck{Status: CheckFail,
			Detail: "ServiceAccount sys/mgr lacks rules of config/rbac: in every namespace: delete configmaps; " +
				"in namespace sys: create events, patch events, create leases.coordination.k8s.io, get leases.coordination.k8s.io, update leases.coordination.k8s.io",
			Remedy: "apply config/rbac of the release (kubectl apply --server-side -f install.yaml), or grant ServiceAccount sys/mgr what it lacks"}},
		{"relinking Secrets", rbacFacts{relinkSecrets: true, clusterRules: sh.cluster, namespaceRules: sh.namespace}, DoctorCheck{Status: CheckFail,
			Detail: "ServiceAccount sys/mgr lacks rules of config/rbac and config/relink-secrets: in every namespace: list secrets, patch secrets, watch secrets",
			Remedy: "apply config/rbac and config/relink-secrets of the release (kubectl apply --server-side -f install-relink-secrets.yaml), or grant ServiceAccount sys/mgr what it lacks"}},
		{"no manager", rbacFacts{skipped: true}, DoctorCheck{Status: CheckSkipped, Detail: "no manager Deployment whose ServiceAccount to look at (see manager)"}},
		{"unreadable", rbacFacts{err: errors.New("boom")}, DoctorCheck{Status: CheckUnknown, Detail: "boom", Remedy: "run kubectl initlock doctor again once the API server answers"}},
	} {
		tc.f.namespace, tc.f.account, tc.want.Name = "sys", "mgr", "manager-rbac"
		expectCheck(t, tc.name, judgeRBAC(tc.f), tc.want)
	}
}
