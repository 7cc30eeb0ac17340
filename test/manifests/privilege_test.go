package manifests_test

import (
	"slices"
	"strings"
	"testing"

	admissionv1 "k8s.io/api/admissionregistration/v1"
	appsv1 "k8s.io/api/apps/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/initlock/initlock/internal/kubeenv"
)

// TestLeastPrivilege checks that only the relink-secrets overlay grants
// access to Secrets, that no install grants delete on a Cluster API kind or
// update on finalizers (only the owner-references-enforcement overlay
// does), that every install holds the admission guardrail, and that the
// metrics are served over HTTPS with a metrics-reader ClusterRole to bind
// to scrapers.
func TestLeastPrivilege(t *testing.T) {
	enforcement := render(t, "KUSTOMIZE_DIR=config/owner-references-enforcement")
	validate := validator(t)
	var granted []string
	for _, o := range enforcement {
		if o.GetKind() == "ClusterRole" {
			var r rbacv1.ClusterRole
			convert(t, o, &r)
			for _, rule := range r.Rules {
				for _, res := range rule.Resources {
					granted = append(granted, strings.Join(rule.Verbs, ",")+" "+res)
				}
			}
		}
		validate(o)
	}
	slices.Sort(granted)
	if want := []string{"delete machinedeployments", "delete machinehealthchecks", "delete machinepools", "delete machines", "delete machinesets",
		"update machinedeployments/finalizers", "update machinepools/finalizers", "update machinesets/finalizers"}; !slices.Equal(granted, want) {
		t.Errorf("config/owner-references-enforcement grants %v, want %v", granted, want)
	}
	for _, tc := range []struct {
		name        string
		objs        []*unstructured.Unstructured
		wantSecrets bool
	}{
		{"default", render(t), false},
		{"relink-secrets", render(t, "KUSTOMIZE_DIR=config/relink-secrets"), true},
	} {
		secrets, reader, args := false, false, ""
		guardrail := map[string]bool{}
		for _, o := range tc.objs {
			switch o.GetKind() {
			case "ValidatingAdmissionPolicy", "ValidatingAdmissionPolicyBinding":
				guardrail[o.GetKind()+" "+o.GetName()] = true
			case "ClusterRole", "Role":
				var r rbacv1.ClusterRole
				convert(t, o, &r)
				for _, rule := range r.Rules {
					secrets = secrets || slices.Contains(rule.Resources, "secrets") || slices.Contains(rule.Resources, "*")
					reader = reader || slices.Contains(rule.NonResourceURLs, "/metrics")
					for _, res := range rule.Resources {
						if strings.HasSuffix(res, "/finalizers") || (slices.Contains(rule.Verbs, "delete") && slices.Contains(rule.APIGroups, "cluster.x-k8s.io")) {
							t.Errorf("%s: %s %s grants %v on %s", tc.name, o.GetKind(), o.GetName(), rule.Verbs, res)
						}
					}
				}
			case "Deployment":
				var d appsv1.Deployment
				convert(t, o, &d)
				args = strings.Join(d.Spec.Template.Spec.Containers[0].Args, " ")
			}
		}
		if !guardrail["ValidatingAdmissionPolicy initlock-manager-guardrail"] || !guardrail["ValidatingAdmissionPolicyBinding initlock-manager-guardrail"] {
			t.Errorf("%s: no admission guardrail: %v", tc.name, guardrail)
		}
		if secrets != tc.wantSecrets || strings.Contains(args, "--relink-secrets") != tc.wantSecrets {
			t.Errorf("%s: a role grants Secrets: %t, manager args %q; want Secrets only with the overlay", tc.name, secrets, args)
		}
		if !reader || !strings.Contains(args, "--metrics-bind-address=:8443") || strings.Contains(args, "--metrics-secure=false") {
			t.Errorf("%s: metrics-reader ClusterRole: %t, manager args %q; want HTTPS metrics on :8443", tc.name, reader, args)
		}
	}
}

// NamespaceSelector selects the Namespace of the install manifests alone,
// as the README applies it before a server-side dry run of the rest.
const NamespaceSelector = "app.kubernetes.io/component=namespace"

// TestInstallHoldsTheLockGuard checks that the install renders the lock
// guard (config/protection) as the tests install it (kubeenv.ReadLockGuard):
// the same policy and binding, with the same names. The install's other
// policy, the guardrail of config/guardrail, has names of its own.
func TestInstallHoldsTheLockGuard(t *testing.T) {
	want, err := kubeenv.ReadLockGuard()
	if err != nil {
		t.Fatal(err)
	}
	found := 0
	for _, o := range render(t) {
		switch {
		case o.GetKind() == "ValidatingAdmissionPolicy" && o.GetName() == want.Policy.Name:
			var got admissionv1.ValidatingAdmissionPolicy
			convert(t, o, &got)
			if !equality.Semantic.DeepEqual(got.Spec, want.Policy.Spec) {
				t.Errorf("install renders policy %s otherwise than %s holds it", got.Name, kubeenv.LockGuardFile)
			}
			found++
		case o.GetKind() == "ValidatingAdmissionPolicyBinding" && o.GetName() == want.Binding.Name:
			var got admissionv1.ValidatingAdmissionPolicyBinding
			convert(t, o, &got)
			if !equality.Semantic.DeepEqual(got.Spec, want.Binding.Spec) {
				t.Errorf("install renders binding %s (%+v), want %+v", got.Name, got.Spec, want.Binding.Spec)
			}
			found++
		}
	}
	if found != 2 {
		t.Fatalf("install renders %d of the lock guard's objects (%s and its binding %s), want both", found, want.Policy.Name, want.Binding.Name)
	}
}
