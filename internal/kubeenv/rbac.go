package kubeenv

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"
)

// MarkerRules reads the RBAC rules from the kubebuilder markers
// ("// +kubebuilder:rbac:groups=...,resources=...,verbs=...") of the files,
// the sources controller-gen generates roles from.
func MarkerRules(t testing.TB, files ...string) []rbacv1.PolicyRule {
	t.Helper()
	var b []byte
	for _, f := range files {
		fb, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		b = append(b, fb...)
	}
	var rules []rbacv1.PolicyRule
	for line := range strings.Lines(string(b)) {
		spec, ok := strings.CutPrefix(strings.TrimSpace(line), "// +kubebuilder:rbac:")
		if !ok {
			continue
		}
		var rule rbacv1.PolicyRule
		for kv := range strings.SplitSeq(spec, ",") {
			k, v, _ := strings.Cut(kv, "=")
			values := strings.Split(strings.Trim(v, `"`), ";")
			switch k {
			case "groups":
				rule.APIGroups = values
			case "resources":
				rule.Resources = values
			case "verbs":
				rule.Verbs = values
			default:
				t.Fatalf("marker %q: unexpected key %q", spec, k)
			}
		}
		rules = append(rules, rule)
	}
	if len(rules) == 0 {
		t.Fatalf("no RBAC marker in %v", files)
	}
	return rules
}

// UserSubject is the RBAC subject of the user name, as AddUser creates it.
func UserSubject(name string) rbacv1.Subject {
	return rbacv1.Subject{Kind: rbacv1.UserKind, APIGroup: rbacv1.GroupName, Name: name}
}

// BindClusterRole creates the ClusterRole name with rules and a
// ClusterRoleBinding of the same name to subject, and deletes both when t
// ends. The authorizer applies them a little later: wait for a request
// they allow before relying on them.
func (e *Env) BindClusterRole(t testing.TB, name string, rules []rbacv1.PolicyRule, subject rbacv1.Subject) {
	t.Helper()
	role := &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: name}, Rules: rules}
	binding := &rbacv1.ClusterRoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: name},
		Subjects:   []rbacv1.Subject{subject},
	}
	for _, obj := range []client.Object{role, binding} {
		if err := e.Client.Create(t.Context(), obj); err != nil {
			t.Fatalf("creating %T %s: %v", obj, name, err)
		}
		t.Cleanup(func() { _ = e.Client.Delete(context.WithoutCancel(t.Context()), obj) })
	}
}

// GeneratedClusterRoleRules reads the rules of the ClusterRole that
// controller-gen wrote into config/<dir>/role.yaml (the first object of the
// file), e.g. dir "rbac" for the manager's.
func GeneratedClusterRoleRules(t testing.TB, dir string) []rbacv1.PolicyRule {
	t.Helper()
	path, role := readClusterRole(t, yaml.Unmarshal, dir, "role.yaml")
	if role.Kind != "ClusterRole" || len(role.Rules) == 0 {
		t.Fatalf("%s: first object is a %s with %d rules, want a ClusterRole with rules", path, role.Kind, len(role.Rules))
	}
	return role.Rules
}

// readClusterRole reads config/<dir>/<file> of the repository as a
// ClusterRole with unmarshal, and returns its path and the role.
func readClusterRole(t testing.TB, unmarshal func([]byte, any, ...yaml.JSONOpt) error, dir, file string) (string, *rbacv1.ClusterRole) {
	t.Helper()
	root, err := RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(root, "config", dir, file)
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	role := &rbacv1.ClusterRole{}
	if err := unmarshal(b, role); err != nil {
		t.Fatalf("reading %s: %v", path, err)
	}
	return path, role
}

// ServiceAccountToken creates the ServiceAccount ns/name unless it exists,
// and returns a token of it, valid ten minutes, from the TokenRequest API:
// what a Pod running as that ServiceAccount presents.
func (e *Env) ServiceAccountToken(t testing.TB, ns, name string) string {
	t.Helper()
	sa := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}}
	if err := e.Client.Create(t.Context(), sa); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatalf("creating ServiceAccount %s/%s: %v", ns, name, err)
	}
	cs, err := kubernetes.NewForConfig(e.Config)
	if err != nil {
		t.Fatal(err)
	}
	tr, err := cs.CoreV1().ServiceAccounts(ns).CreateToken(t.Context(), name, &authenticationv1.TokenRequest{
		Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: new(int64(600))},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("requesting a token for ServiceAccount %s/%s: %v", ns, name, err)
	}
	return tr.Status.Token
}

// ServiceAccountConfig returns a rest.Config that authenticates as the
// ServiceAccount ns/name with a token of it (ServiceAccountToken), with the
// Env's rate limits.
func (e *Env) ServiceAccountConfig(t testing.TB, ns, name string) *rest.Config {
	t.Helper()
	cfg := rest.AnonymousClientConfig(e.Config)
	cfg.BearerToken = e.ServiceAccountToken(t, ns, name)
	return cfg
}

// BindMetricsReader creates the metrics-reader ClusterRole of config/rbac,
// under a name of the namespace's own, and binds it to the ServiceAccount
// ns/sa, as an operator binds a Prometheus to it.
func (e *Env) BindMetricsReader(t testing.TB, ns, sa string) {
	t.Helper()
	_, role := readClusterRole(t, yaml.UnmarshalStrict, "rbac", "metrics_reader_role.yaml")
	e.BindClusterRole(t, "initlock-metrics-reader-"+ns, role.Rules, rbacv1.Subject{Kind: rbacv1.ServiceAccountKind, Namespace: ns, Name: sa})
}
