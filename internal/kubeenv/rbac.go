package kubeenv

import (
	"os"
	"strings"
	"testing"

	rbacv1 "k8s.io/api/rbac/v1"
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
