package lockguard_test

import (
	"errors"
	"strings"
	"testing"

	admissionv1 "k8s.io/api/admissionregistration/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/initlock/initlock/internal/lockguard"
)

const name = lockguard.DefaultName

type (
	vap  = admissionv1.ValidatingAdmissionPolicy
	vapb = admissionv1.ValidatingAdmissionPolicyBinding
	// change changes the installed policy and binding; a nil result is a
	// missing object.
	change = func(*vap, *vapb) (*vap, *vapb)
)

// installed returns the shipped policy and binding as config/default
// installs them: named with its prefix.
func installed(t *testing.T) (*vap, *vapb) {
	t.Helper()
	p, b, err := lockguard.Shipped()
	if err != nil {
		t.Fatal(err)
	}
	p.Name, b.Name, b.Spec.PolicyName = name, name, name
	return p, b
}

// serverDefaults sets on p what the API server sets on a create: the
// defaults of admissionregistration/v1, as read back from kube-apiserver.
func serverDefaults(p *vap) {
	m := p.Spec.MatchConstraints
	m.MatchPolicy = ptr.To(admissionv1.Equivalent)
	if m.NamespaceSelector == nil {
		m.NamespaceSelector = &metav1.LabelSelector{}
	}
	if m.ObjectSelector == nil {
		m.ObjectSelector = &metav1.LabelSelector{}
	}
	for i := range m.ResourceRules {
		m.ResourceRules[i].Scope = ptr.To(admissionv1.AllScopes)
	}
	if p.Spec.FailurePolicy == nil {
		p.Spec.FailurePolicy = ptr.To(admissionv1.Fail)
	}
}

func rule(groups, versions, resources []string, ops ...admissionv1.OperationType) admissionv1.NamedRuleWithOperations {
	return admissionv1.NamedRuleWithOperations{RuleWithOperations: admissionv1.RuleWithOperations{
		Operations: ops, Rule: admissionv1.Rule{APIGroups: groups, APIVersions: versions, Resources: resources}}}
}

var (
	core       = []string{""}
	v1         = []string{"v1"}
	every      = []string{"*"}
	configMaps = []string{"configmaps"}
	deleteOp   = admissionv1.Delete
	updateOp   = admissionv1.Update
)

// matchAll is a binding's matchResources as the API server defaults an
// empty one: it takes nothing away.
func matchAll() *admissionv1.MatchResources {
	return &admissionv1.MatchResources{NamespaceSelector: &metav1.LabelSelector{}, ObjectSelector: &metav1.LabelSelector{},
		MatchPolicy: ptr.To(admissionv1.Equivalent)}
}

// TestJudge: the lock guard is in force exactly when its policy is the
// shipped one (defaults aside) and its binding binds it to deny every
// request the policy matches; otherwise the error names the object, the
// field and the fix.
func TestJudge(t *testing.T) {
	for _, tc := range []struct {
		name   string
		change change
		// want is "" for in force, else what the error must say.
		want string
	}{
		{"as shipped", same, ""},
		{"as the API server returns it, defaulted", func(p *vap, b *vapb) (*vap, *vapb) {
			serverDefaults(p)
			p.UID, p.ResourceVersion, p.Generation = "u1", "42", 1
			return p, b
		}, ""},
		{"audit annotations added", policy(func(p *vap) {
			p.Spec.AuditAnnotations = []admissionv1.AuditAnnotation{{Key: "k", ValueExpression: "'v'"}}
		}), ""},
		{"Deny and Audit", binding(func(b *vapb) {
			b.Spec.ValidationActions = []admissionv1.ValidationAction{admissionv1.Audit, admissionv1.Deny}
		}), ""},
		{"an empty matchResources, defaulted", binding(func(b *vapb) { b.Spec.MatchResources = matchAll() }), ""},
		{"resource rules that cover the policy's", binding(func(b *vapb) {
			b.Spec.MatchResources = matchAll()
			b.Spec.MatchResources.ResourceRules = []admissionv1.NamedRuleWithOperations{
				rule(core, v1, configMaps, deleteOp), rule(core, every, []string{"*"}, updateOp)}
		}), ""},
		{"resource rules of every resource", binding(func(b *vapb) {
			b.Spec.MatchResources = &admissionv1.MatchResources{ResourceRules: []admissionv1.NamedRuleWithOperations{
				rule(every, every, []string{"*/*"}, admissionv1.OperationAll)}}
		}), ""},
		{"an exclusion of other resources", binding(func(b *vapb) {
			b.Spec.MatchResources = &admissionv1.MatchResources{ExcludeResourceRules: []admissionv1.NamedRuleWithOperations{
				rule(core, v1, []string{"secrets", "configmaps/status"}, deleteOp, updateOp), rule([]string{"apps"}, every, []string{"*"}, admissionv1.OperationAll)}}
		}), ""},

		{"both missing", func(*vap, *vapb) (*vap, *vapb) { return nil, nil }, "ValidatingAdmissionPolicy initlock-lock-guard and its ValidatingAdmissionPolicyBinding initlock-lock-guard are missing: apply config/protection from the release"},
		{"policy missing", func(_ *vap, b *vapb) (*vap, *vapb) { return nil, b }, "ValidatingAdmissionPolicy initlock-lock-guard is missing: apply config/protection from the release"},
		{"binding missing", func(p *vap, _ *vapb) (*vap, *vapb) { return p, nil }, "ValidatingAdmissionPolicyBinding initlock-lock-guard is missing: apply config/protection from the release"},
		{"policy being deleted", policy(func(p *vap) {
			p.DeletionTimestamp, p.Finalizers = &metav1.Time{}, []string{"example.com/hold"}
		}), "ValidatingAdmissionPolicy initlock-lock-guard is being deleted"},
		{"binding being deleted", binding(func(b *vapb) {
			b.DeletionTimestamp, b.Finalizers = &metav1.Time{}, []string{"example.com/hold"}
		}), "ValidatingAdmissionPolicyBinding initlock-lock-guard is being deleted"},

		{"a validation removed", policy(func(p *vap) {
			p.Spec.Validations = p.Spec.Validations[1:]
		}), "ValidatingAdmissionPolicy initlock-lock-guard is not the one initlock ships (spec.validations differs): delete it and apply config/protection from the release"},
		{"a validation's expression changed", policy(func(p *vap) { p.Spec.Validations[0].Expression = "true" }), "(spec.validations differs)"},
		{"failurePolicy Ignore", policy(func(p *vap) { p.Spec.FailurePolicy = ptr.To(admissionv1.Ignore) }), "(spec.failurePolicy differs)"},
		{"a match condition and a variable changed", policy(func(p *vap) {
			p.Spec.MatchConditions[0].Expression = "false"
			p.Spec.Variables = p.Spec.Variables[:1]
		}), "(spec.matchConditions, spec.variables differ)"},
		{"deletes no longer matched", policy(func(p *vap) {
			p.Spec.MatchConstraints.ResourceRules[0].Operations = []admissionv1.OperationType{updateOp}
		}), "(spec.matchConstraints differs)"},
		{"a namespace selector on the policy", policy(func(p *vap) {
			serverDefaults(p)
			p.Spec.MatchConstraints.NamespaceSelector.MatchLabels = map[string]string{"guarded": "yes"}
		}), "(spec.matchConstraints differs)"},
		{"parameters", policy(func(p *vap) { p.Spec.ParamKind = &admissionv1.ParamKind{APIVersion: "v1", Kind: "ConfigMap"} }), "(spec.paramKind differs)"},

		{"another policy bound", binding(func(b *vapb) { b.Spec.PolicyName = "lock-guard" }),
			`ValidatingAdmissionPolicyBinding initlock-lock-guard binds policy "lock-guard", not initlock-lock-guard`},
		{"Warn only", binding(func(b *vapb) {
			b.Spec.ValidationActions = []admissionv1.ValidationAction{admissionv1.Warn, admissionv1.Audit}
		}), "has validationActions [Warn Audit], without Deny"},
		{"a namespace selector that selects no namespace", binding(func(b *vapb) {
			b.Spec.MatchResources = matchAll()
			b.Spec.MatchResources.NamespaceSelector.MatchLabels = map[string]string{"no-such-label": "x"}
		}), "ValidatingAdmissionPolicyBinding initlock-lock-guard keeps the policy from some of the requests it applies to (spec.matchResources.namespaceSelector): delete it and apply config/protection from the release"},
		{"a namespace selector by expression", binding(func(b *vapb) {
			b.Spec.MatchResources = &admissionv1.MatchResources{NamespaceSelector: &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{
				{Key: "kubernetes.io/metadata.name", Operator: metav1.LabelSelectorOpNotIn, Values: []string{"capi"}}}}}
		}), "(spec.matchResources.namespaceSelector)"},
		{"an object selector", binding(func(b *vapb) {
			b.Spec.MatchResources = &admissionv1.MatchResources{ObjectSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"a": "b"}}}
		}), "(spec.matchResources.objectSelector)"},
		{"exact versions only", binding(func(b *vapb) {
			b.Spec.MatchResources = &admissionv1.MatchResources{MatchPolicy: ptr.To(admissionv1.Exact)}
		}), "(spec.matchResources.matchPolicy)"},
		{"resource rules without updates", binding(func(b *vapb) {
			b.Spec.MatchResources = &admissionv1.MatchResources{ResourceRules: []admissionv1.NamedRuleWithOperations{rule(core, v1, configMaps, deleteOp)}}
		}), "(spec.matchResources.resourceRules)"},
		{"resource rules of other resources", binding(func(b *vapb) {
			b.Spec.MatchResources = &admissionv1.MatchResources{ResourceRules: []admissionv1.NamedRuleWithOperations{
				rule(core, v1, []string{"secrets", "configmaps/status", "*/scale"}, admissionv1.OperationAll)}}
		}), "(spec.matchResources.resourceRules)"},
		{"resource rules of some names", binding(func(b *vapb) {
			r := rule(every, every, configMaps, admissionv1.OperationAll)
			r.ResourceNames = []string{"c1-lock"}
			b.Spec.MatchResources = &admissionv1.MatchResources{ResourceRules: []admissionv1.NamedRuleWithOperations{r}}
		}), "(spec.matchResources.resourceRules)"},
		{"resource rules of cluster-scoped resources", binding(func(b *vapb) {
			r := rule(every, every, configMaps, admissionv1.OperationAll)
			r.Scope = ptr.To(admissionv1.ClusterScope)
			b.Spec.MatchResources = &admissionv1.MatchResources{ResourceRules: []admissionv1.NamedRuleWithOperations{r}}
		}), "(spec.matchResources.resourceRules)"},
		{"config maps excluded", binding(func(b *vapb) {
			b.Spec.MatchResources = &admissionv1.MatchResources{ExcludeResourceRules: []admissionv1.NamedRuleWithOperations{
				rule(core, v1, configMaps, deleteOp)}}
		}), "(spec.matchResources.excludeResourceRules)"},
		{"some config maps excluded by name", binding(func(b *vapb) {
			r := rule(every, every, []string{"*"}, admissionv1.OperationAll)
			r.ResourceNames = []string{"c1-lock"}
			b.Spec.MatchResources = &admissionv1.MatchResources{ExcludeResourceRules: []admissionv1.NamedRuleWithOperations{r}}
		}), "(spec.matchResources.excludeResourceRules)"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p, b := tc.change(installed(t))
			err := lockguard.Judge(name, p, b)
			if tc.want == "" {
				if err != nil {
					t.Fatalf("Judge = %v, want in force", err)
				}
				return
			}
			if !errors.Is(err, lockguard.ErrNotInForce) || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("Judge = %v\nwant ErrNotInForce saying %q", err, tc.want)
			}
			if !strings.HasPrefix(err.Error(), "the lock guard is not in force: ") {
				t.Errorf("Judge = %v, want it to start with what it means", err)
			}
		})
	}
}

func same(p *admissionv1.ValidatingAdmissionPolicy, b *admissionv1.ValidatingAdmissionPolicyBinding) (*admissionv1.ValidatingAdmissionPolicy, *admissionv1.ValidatingAdmissionPolicyBinding) {
	return p, b
}

// policy and binding make a change of one of the two objects.
func policy(f func(*vap)) change {
	return func(p *vap, b *vapb) (*vap, *vapb) {
		f(p)
		return p, b
	}
}

func binding(f func(*vapb)) change {
	return func(p *vap, b *vapb) (*vap, *vapb) {
		f(b)
		return p, b
	}
}

// TestShipped: the shipped guard is the policy and binding of the file,
// named as there, and each call returns objects of its own.
func TestShipped(t *testing.T) {
	p, b, err := lockguard.Shipped()
	if err != nil {
		t.Fatal(err)
	}
	if p.Name != "lock-guard" || b.Name != "lock-guard" || b.Spec.PolicyName != "lock-guard" || len(p.Spec.Validations) == 0 {
		t.Fatalf("Shipped = policy %s (%d validations), binding %s of %s", p.Name, len(p.Spec.Validations), b.Name, b.Spec.PolicyName)
	}
	p.Spec.Validations = nil
	if again, _, _ := lockguard.Shipped(); len(again.Spec.Validations) == 0 {
		t.Fatal("a change of what Shipped returned changed what it returns next")
	}
}
