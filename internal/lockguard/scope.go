package lockguard

import (
	"slices"
	"strings"

	admissionv1 "k8s.io/api/admissionregistration/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// narrowing names the field of a binding's matchResources m that takes
// requests away from a policy whose (defaulted) matchConstraints are
// policy, "" when none does. The API server applies a policy through a
// binding to the requests both match, so m takes none away when it is
// absent, or when each of its fields selects all the policy selects:
//   - namespaceSelector and objectSelector empty (they select everything;
//     any label or expression is judged to take some away, whatever the
//     labels of the cluster);
//   - matchPolicy Equivalent (the default), or Exact when the policy's is;
//   - resourceRules empty, or covering every group, version, resource and
//     operation of the policy's rules, each by a rule without resourceNames
//     whose scope is "*" or the policy rule's;
//   - excludeResourceRules that exclude nothing the policy's rules match
//     (a rule with resourceNames excludes those names: it takes requests
//     away).
//
// Wildcards are read as the API server reads them: "*" in groups,
// versions and operations is every one; in resources, "*" is every
// resource but no subresource, "r/*" every subresource of r, "*/s"
// subresource s of every resource, and "*/*" everything.
func narrowing(m, policy *admissionv1.MatchResources) string {
	if m == nil {
		return ""
	}
	switch {
	case !selectsAll(m.NamespaceSelector):
		return "spec.matchResources.namespaceSelector"
	case !selectsAll(m.ObjectSelector):
		return "spec.matchResources.objectSelector"
	case m.MatchPolicy != nil && *m.MatchPolicy == admissionv1.Exact &&
		(policy == nil || policy.MatchPolicy == nil || *policy.MatchPolicy != admissionv1.Exact):
		return "spec.matchResources.matchPolicy"
	}
	var tuples []tuple
	if policy != nil {
		tuples = expand(policy.ResourceRules)
	}
	if len(m.ResourceRules) > 0 {
		for _, t := range tuples {
			if !slices.ContainsFunc(m.ResourceRules, t.coveredBy) {
				return "spec.matchResources.resourceRules"
			}
		}
	}
	for _, ex := range m.ExcludeResourceRules {
		if slices.ContainsFunc(tuples, func(t tuple) bool { return t.overlaps(ex) }) {
			return "spec.matchResources.excludeResourceRules"
		}
	}
	return ""
}

// selectsAll tells that s selects every object: absent, or with neither
// labels nor expressions.
func selectsAll(s *metav1.LabelSelector) bool {
	return s == nil || len(s.MatchLabels) == 0 && len(s.MatchExpressions) == 0
}

// tuple is one group, version, resource and operation a policy rule
// matches, with the rule's scope and resourceNames.
type tuple struct {
	group, version, resource string
	operation                admissionv1.OperationType
	scope                    admissionv1.ScopeType
	names                    []string
}

func expand(rules []admissionv1.NamedRuleWithOperations) []tuple {
	var out []tuple
	for _, r := range rules {
		scope := admissionv1.AllScopes
		if r.Scope != nil {
			scope = *r.Scope
		}
		for _, g := range r.APIGroups {
			for _, v := range r.APIVersions {
				for _, res := range r.Resources {
					for _, op := range r.Operations {
						out = append(out, tuple{group: g, version: v, resource: res, operation: op, scope: scope, names: r.ResourceNames})
					}
				}
			}
		}
	}
	return out
}

// coveredBy tells that rule r matches every request t matches.
func (t tuple) coveredBy(r admissionv1.NamedRuleWithOperations) bool {
	return (len(r.ResourceNames) == 0 || len(t.names) > 0 && allIn(t.names, r.ResourceNames)) &&
		covers(r.APIGroups, t.group) && covers(r.APIVersions, t.version) &&
		slices.ContainsFunc(r.Resources, func(p string) bool { return resourceCovers(p, t.resource) }) &&
		(slices.Contains(r.Operations, admissionv1.OperationAll) || slices.Contains(r.Operations, t.operation)) &&
		(r.Scope == nil || *r.Scope == admissionv1.AllScopes || *r.Scope == t.scope)
}

// overlaps tells that rule r matches some request t matches.
func (t tuple) overlaps(r admissionv1.NamedRuleWithOperations) bool {
	return meets(r.APIGroups, t.group) && meets(r.APIVersions, t.version) &&
		slices.ContainsFunc(r.Resources, func(p string) bool { return resourceMeets(p, t.resource) }) &&
		(t.operation == admissionv1.OperationAll || slices.Contains(r.Operations, admissionv1.OperationAll) || slices.Contains(r.Operations, t.operation)) &&
		(r.Scope == nil || *r.Scope == admissionv1.AllScopes || t.scope == admissionv1.AllScopes || *r.Scope == t.scope)
}

func allIn(names, in []string) bool {
	return !slices.ContainsFunc(names, func(n string) bool { return !slices.Contains(in, n) })
}

// covers tells that list, of groups or versions, holds v or "*".
func covers(list []string, v string) bool {
	return slices.Contains(list, "*") || slices.Contains(list, v)
}

// meets tells that list, of groups or versions, and v have one in common.
func meets(list []string, v string) bool { return len(list) > 0 && (v == "*" || covers(list, v)) }

// resourceCovers tells that resource pattern p matches every resource and
// subresource that resource pattern r matches.
func resourceCovers(p, r string) bool {
	if p == "*/*" {
		return true
	}
	pm, ps, _ := strings.Cut(p, "/")
	rm, rs, _ := strings.Cut(r, "/")
	return (pm == rm || pm == "*") && (ps == rs || ps == "*" && rs != "")
}

// resourceMeets tells that resource patterns p and r match a resource or
// subresource in common.
func resourceMeets(p, r string) bool {
	if p == "*/*" || r == "*/*" {
		return true
	}
	pm, ps, _ := strings.Cut(p, "/")
	rm, rs, _ := strings.Cut(r, "/")
	return (pm == rm || pm == "*" || rm == "*") && (ps == rs || ps == "*" && rs != "" || rs == "*" && ps != "")
}
