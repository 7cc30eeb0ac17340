package lockguard

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"

	admissionv1 "k8s.io/api/admissionregistration/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// ErrNotInForce is wrapped by the error of Check and Judge when the lock
// guard is not in force: held init locks can then be deleted by anyone.
// The error names the object at fault and the fix.
var ErrNotInForce = errors.New("the lock guard is not in force")

// The fixes the errors name.
const (
	fixApply   = "apply config/protection from the release"
	fixReplace = "delete it and apply config/protection from the release"
)

// Guard is the lock guard as Check read it: its policy and binding, nil
// when missing or not read.
type Guard struct {
	Policy  *admissionv1.ValidatingAdmissionPolicy
	Binding *admissionv1.ValidatingAdmissionPolicyBinding
}

// Check reads, through r, the ValidatingAdmissionPolicy and the
// ValidatingAdmissionPolicyBinding called name (the install names both
// DefaultName), one GET each, always both, and judges them (Judge): nil
// when the lock guard is in force, an error wrapping ErrNotInForce when
// it is not. Any other error means that Check cannot tell: it names the
// object it was reading and wraps the API server's error
// (apierrors.IsForbidden tells a reader without the right to read it). An
// API server that does not serve ValidatingAdmissionPolicies (Kubernetes
// older than 1.30) has no guard in force. It returns what it read.
func Check(ctx context.Context, r client.Reader, name string) (Guard, error) {
	var g Guard
	policy := &admissionv1.ValidatingAdmissionPolicy{}
	perr := get(ctx, r, "ValidatingAdmissionPolicy", name, policy)
	if perr == nil && policy.Name != "" {
		g.Policy = policy
	}
	binding := &admissionv1.ValidatingAdmissionPolicyBinding{}
	berr := get(ctx, r, "ValidatingAdmissionPolicyBinding", name, binding)
	if berr == nil && binding.Name != "" {
		g.Binding = binding
	}
	if err := cmp.Or(perr, berr); err != nil {
		return g, err
	}
	return g, Judge(name, g.Policy, g.Binding)
}

// get reads the object of kind called name into obj, leaving obj empty
// when there is none.
func get(ctx context.Context, r client.Reader, kind, name string, obj client.Object) error {
	err := r.Get(ctx, client.ObjectKey{Name: name}, obj)
	switch {
	case err == nil, apierrors.IsNotFound(err):
		return nil
	case meta.IsNoMatchError(err):
		return fmt.Errorf("%w: the API server does not serve the kind %s of admissionregistration.k8s.io/v1 (Kubernetes 1.30 and later do): %w", ErrNotInForce, kind, err)
	}
	return fmt.Errorf("reading %s %s: %w", kind, name, err)
}

// Judge tells whether the lock guard whose policy and binding are called
// name, read as policy and binding (nil when missing), is in force: nil
// when it is, an error wrapping ErrNotInForce that names the object at
// fault and the fix when it is not.
//
// It is in force when both exist and are not being deleted, the policy's
// spec is the one initlock ships (Shipped) in what decides a request
// (matchConstraints, matchConditions, variables, validations,
// failurePolicy and paramKind; auditAnnotations refuse nothing and are
// not compared), compared as decoded objects once the fields the API
// server defaults are set on both sides (defaulted), and the binding binds
// that policy with Deny among its validationActions and takes no request
// away from it (narrowing). A paramRef of the binding is not looked at: a
// policy without paramKind, as the shipped one, reads no parameters.
func Judge(name string, policy *admissionv1.ValidatingAdmissionPolicy, binding *admissionv1.ValidatingAdmissionPolicyBinding) error {
	switch {
	case policy == nil && binding == nil:
		return notInForce("ValidatingAdmissionPolicy %s and its ValidatingAdmissionPolicyBinding %s are missing: %s", name, name, fixApply)
	case policy == nil:
		return notInForce("ValidatingAdmissionPolicy %s is missing: %s", name, fixApply)
	case binding == nil:
		return notInForce("ValidatingAdmissionPolicyBinding %s is missing: %s", name, fixApply)
	case policy.DeletionTimestamp != nil:
		return notInForce("ValidatingAdmissionPolicy %s is being deleted: %s", name, fixApply)
	case binding.DeletionTimestamp != nil:
		return notInForce("ValidatingAdmissionPolicyBinding %s is being deleted: %s", name, fixApply)
	}
	want, _, err := Shipped()
	if err != nil {
		return err
	}
	if fields := specDiff(policy.Spec, want.Spec); len(fields) > 0 {
		return notInForce("ValidatingAdmissionPolicy %s is not the one initlock ships (%s %s): %s",
			name, strings.Join(fields, ", "), plural(len(fields), "differs", "differ"), fixReplace)
	}
	b := binding.Spec
	if b.PolicyName != name {
		return notInForce("ValidatingAdmissionPolicyBinding %s binds policy %q, not %s: %s", name, b.PolicyName, name, fixReplace)
	}
	if !slices.Contains(b.ValidationActions, admissionv1.Deny) {
		return notInForce("ValidatingAdmissionPolicyBinding %s has validationActions %v, without Deny: the policy refuses nothing: %s", name, b.ValidationActions, fixReplace)
	}
	if field := narrowing(b.MatchResources, defaulted(policy.Spec).MatchConstraints); field != "" {
		return notInForce("ValidatingAdmissionPolicyBinding %s keeps the policy from some of the requests it applies to (%s): %s", name, field, fixReplace)
	}
	return nil
}

func notInForce(format string, args ...any) error {
	return fmt.Errorf("%w: %s", ErrNotInForce, fmt.Sprintf(format, args...))
}

func plural(n int, one, many string) string {
	if n == 1 {
		return one
	}
	return many
}

// specDiff names the fields of live that decide a request and differ from
// want's, once both are defaulted.
func specDiff(live, want admissionv1.ValidatingAdmissionPolicySpec) []string {
	l, w := defaulted(live), defaulted(want)
	var fields []string
	for _, f := range []struct {
		name       string
		live, want any
	}{
		{"spec.paramKind", l.ParamKind, w.ParamKind},
		{"spec.matchConstraints", l.MatchConstraints, w.MatchConstraints},
		{"spec.matchConditions", l.MatchConditions, w.MatchConditions},
		{"spec.variables", l.Variables, w.Variables},
		{"spec.validations", l.Validations, w.Validations},
		{"spec.failurePolicy", l.FailurePolicy, w.FailurePolicy},
	} {
		if !equality.Semantic.DeepEqual(f.live, f.want) {
			fields = append(fields, f.name)
		}
	}
	return fields
}

// defaulted returns a copy of spec with the fields the API server defaults
// on a create or an update (k8s.io/kubernetes's admissionregistration/v1
// defaults) set as it sets them when they are not: failurePolicy Fail; in
// matchConstraints, matchPolicy Equivalent, namespaceSelector and
// objectSelector {} (everything), and the scope "*" of each resource rule
// and excluded resource rule.
func defaulted(spec admissionv1.ValidatingAdmissionPolicySpec) admissionv1.ValidatingAdmissionPolicySpec {
	s := spec.DeepCopy()
	if s.FailurePolicy == nil {
		fail := admissionv1.Fail
		s.FailurePolicy = &fail
	}
	defaultMatch(s.MatchConstraints)
	return *s
}

// defaultMatch sets the defaults of m, as defaulted says.
func defaultMatch(m *admissionv1.MatchResources) {
	if m == nil {
		return
	}
	if m.MatchPolicy == nil {
		p := admissionv1.Equivalent
		m.MatchPolicy = &p
	}
	if m.NamespaceSelector == nil {
		m.NamespaceSelector = &metav1.LabelSelector{}
	}
	if m.ObjectSelector == nil {
		m.ObjectSelector = &metav1.LabelSelector{}
	}
	for _, rules := range [][]admissionv1.NamedRuleWithOperations{m.ResourceRules, m.ExcludeResourceRules} {
		for i := range rules {
			if rules[i].Scope == nil {
				all := admissionv1.AllScopes
				rules[i].Scope = &all
			}
		}
	}
}
