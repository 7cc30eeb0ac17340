package apimodel

import (
	"context"
	"fmt"
	"net/http"
	"strings"

	admissionv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apiserver/pkg/admission"
	"k8s.io/apiserver/pkg/admission/plugin/cel"
	"k8s.io/apiserver/pkg/admission/plugin/policy/validating"
	"k8s.io/apiserver/pkg/admission/plugin/webhook/matchconditions"
	celconfig "k8s.io/apiserver/pkg/apis/cel"
	"k8s.io/apiserver/pkg/authentication/user"
	"k8s.io/apiserver/pkg/cel/environment"

	"github.com/initlock/initlock/internal/kubeenv"
)

// Guard is a ValidatingAdmissionPolicy the model enforces on deletes of
// ConfigMaps, evaluated by kube-apiserver's own policy machinery
// (k8s.io/apiserver's validating admission policy validator and its CEL
// environment): the model refuses what the API server refuses, with 403
// Forbidden. It handles the policies the project ships: matched on DELETE
// and UPDATE of configmaps, with match conditions, variables and validations, no
// parameters and no authorizer checks.
type Guard struct {
	selector  labels.Selector
	name      string
	binding   string
	validator validating.Validator
	scheme    *runtime.Scheme
}

// LockGuard is the project's lock guard (kubeenv.LockGuardFile), compiled:
// its policy, bound by its binding with the Deny action.
func LockGuard() (*Guard, error) {
	g, err := kubeenv.ReadLockGuard()
	if err != nil {
		return nil, err
	}
	policy, binding := g.Policy, g.Binding
	if policy.Spec.ParamKind != nil {
		return nil, fmt.Errorf("policy %s: parameters are not modelled", policy.Name)
	}
	if binding.Spec.PolicyName != policy.Name || len(binding.Spec.ValidationActions) != 1 || binding.Spec.ValidationActions[0] != admissionv1.Deny {
		return nil, fmt.Errorf("binding %s: want policy %s with the Deny action alone", binding.Name, policy.Name)
	}
	env := environment.MustBaseEnvSet(environment.DefaultCompatibilityVersion())
	compiler, err := cel.NewCompositedCompiler(env)
	if err != nil {
		return nil, err
	}
	vars := cel.OptionalVariableDeclarations{HasParams: false, HasAuthorizer: true}
	named := make([]cel.NamedExpressionAccessor, len(policy.Spec.Variables))
	for i, v := range policy.Spec.Variables {
		named[i] = &validating.Variable{Name: v.Name, Expression: v.Expression}
	}
	compiler.CompileAndStoreVariables(named, vars, environment.StoredExpressions)
	var matcher matchconditions.Matcher
	if n := len(policy.Spec.MatchConditions); n > 0 {
		conds := make([]cel.ExpressionAccessor, n)
		for i := range policy.Spec.MatchConditions {
			conds[i] = (*matchconditions.MatchCondition)(&policy.Spec.MatchConditions[i])
		}
		matcher = matchconditions.NewMatcher(compiler.CompileCondition(conds, vars, environment.StoredExpressions),
			policy.Spec.FailurePolicy, "policy", "validate", policy.Name)
	}
	checks := make([]cel.ExpressionAccessor, len(policy.Spec.Validations))
	messages := make([]cel.ExpressionAccessor, len(policy.Spec.Validations))
	for i, v := range policy.Spec.Validations {
		checks[i] = &validating.ValidationCondition{Expression: v.Expression, Message: v.Message, Reason: v.Reason}
		messages[i] = &validating.MessageExpressionCondition{MessageExpression: v.MessageExpression}
	}
	exprVars := cel.OptionalVariableDeclarations{HasParams: false, HasAuthorizer: false}
	validator := validating.NewValidator(
		compiler.CompileCondition(checks, vars, environment.StoredExpressions),
		matcher,
		compiler.CompileCondition(nil, vars, environment.StoredExpressions),
		compiler.CompileCondition(messages, exprVars, environment.StoredExpressions),
		policy.Spec.FailurePolicy, nil)
	if err := validator.CompileError(); err != nil {
		return nil, fmt.Errorf("policy %s: %w", policy.Name, err)
	}
	selector := labels.Everything()
	if mc := policy.Spec.MatchConstraints; mc != nil && mc.ObjectSelector != nil {
		if selector, err = metav1.LabelSelectorAsSelector(mc.ObjectSelector); err != nil {
			return nil, fmt.Errorf("policy %s: object selector: %w", policy.Name, err)
		}
	}
	return &Guard{selector: selector, name: policy.Name, binding: binding.Name, validator: validator, scheme: kubeenv.Scheme()}, nil
}

var configMaps = schema.GroupVersionResource{Version: "v1", Resource: "configmaps"}

// admitDelete judges delete r of stored ConfigMap old, in a namespace that
// is not being deleted (the model has no namespaces): nil when allowed,
// the API server's 403 when refused.
func (g *Guard) admitDelete(old map[string]any, r DeleteRequest) error {
	//nolint:staticcheck // the deprecated field reaches the guard as the API server passes it
	opts := &metav1.DeleteOptions{PropagationPolicy: r.Propagation, OrphanDependents: r.OrphanDependents}
	if r.UID != nil || r.ResourceVersion != nil {
		opts.Preconditions = &metav1.Preconditions{UID: r.UID, ResourceVersion: r.ResourceVersion}
	}
	opts.SetGroupVersionKind(metav1.SchemeGroupVersion.WithKind("DeleteOptions"))
	return g.admit(admission.Delete, old, nil, opts, r.User)
}

// admitUpdate judges the update of stored ConfigMap old into next, as
// admitDelete judges a delete.
func (g *Guard) admitUpdate(old, next map[string]any) error {
	return g.admit(admission.Update, old, next, &metav1.UpdateOptions{}, "")
}

func (g *Guard) admit(op admission.Operation, oldMap, nextMap map[string]any, opts runtime.Object, username string) error {
	if username == "" {
		username = "admin"
	}
	old, err := configMapOf(oldMap)
	if err != nil {
		return err
	}
	var obj runtime.Object
	selected := g.selector.Matches(labels.Set(old.Labels))
	if nextMap != nil {
		next, err := configMapOf(nextMap)
		if err != nil {
			return err
		}
		obj = next
		selected = selected || g.selector.Matches(labels.Set(next.Labels))
	}
	if !selected { // the API server matches the old and the new object
		return nil
	}
	attr := admission.NewAttributesRecord(obj, old, old.GroupVersionKind(), old.Namespace, old.Name, configMaps, "",
		op, opts, false, &user.DefaultInfo{Name: username, Groups: []string{user.SystemPrivilegedGroup}})
	versioned, err := admission.NewVersionedAttributes(attr, old.GroupVersionKind(), admission.NewObjectInterfacesFromScheme(g.scheme))
	if err != nil {
		return err
	}
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: old.Namespace}}
	res := g.validator.Validate(context.Background(), configMaps, versioned, nil, ns, celconfig.RuntimeCELCostBudget, nil)
	for _, d := range res.Decisions {
		if d.Action != validating.ActionDeny {
			continue
		}
		reason := d.Reason
		if reason == "" {
			reason = metav1.StatusReasonInvalid
		}
		msg := fmt.Sprintf("ValidatingAdmissionPolicy '%s' with binding '%s' denied request: %s", g.name, g.binding, strings.TrimSpace(d.Message))
		return &apierrors.StatusError{ErrStatus: metav1.Status{Status: metav1.StatusFailure, Code: http.StatusForbidden,
			Reason: reason, Message: fmt.Sprintf("configmaps %q is forbidden: %s", old.Name, msg),
			Details: &metav1.StatusDetails{Name: old.Name, Kind: "configmaps"}}}
	}
	return nil
}

// configMapOf converts a stored ConfigMap; the conversion copies what it
// reads, so obj is not copied first.
func configMapOf(obj map[string]any) (*corev1.ConfigMap, error) {
	cm := &corev1.ConfigMap{}
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(obj, cm); err != nil {
		return nil, err
	}
	cm.SetGroupVersionKind(corev1.SchemeGroupVersion.WithKind("ConfigMap"))
	return cm, nil
}
