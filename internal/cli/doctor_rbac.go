package cli

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"

	appsv1 "k8s.io/api/apps/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	"github.com/initlock/initlock/config/rbac"
	relinksecrets "github.com/initlock/initlock/config/relink-secrets"
	"github.com/initlock/initlock/internal/cli/inventory"
)

// shippedRules are the rules initlock ships for its manager, read from the
// files embedded in the binary: the ClusterRole and the Role (in the
// manager's namespace) of config/rbac/role.yaml, and the opt-in ClusterRole
// of config/relink-secrets/role.yaml.
type shippedRules struct {
	cluster, namespace, relinkSecrets []rbacv1.PolicyRule
}

// shipped parses the embedded files once.
var shipped = sync.OnceValues(func() (shippedRules, error) {
	var s shippedRules
	var err error
	if s.cluster, err = rulesOf(rbac.Role(), "ClusterRole"); err != nil {
		return s, fmt.Errorf("config/rbac/role.yaml: %w", err)
	}
	if s.namespace, err = rulesOf(rbac.Role(), "Role"); err != nil {
		return s, fmt.Errorf("config/rbac/role.yaml: %w", err)
	}
	if s.relinkSecrets, err = rulesOf(relinksecrets.Role(), "ClusterRole"); err != nil {
		return s, fmt.Errorf("config/relink-secrets/role.yaml: %w", err)
	}
	return s, nil
})

// rulesOf returns the rules of the first object of kind in a file of YAML
// documents.
func rulesOf(file []byte, kind string) ([]rbacv1.PolicyRule, error) {
	for doc := range strings.SplitSeq(string(file), "\n---") {
		var role struct {
			Kind  string              `json:"kind"`
			Rules []rbacv1.PolicyRule `json:"rules"`
		}
		if err := yaml.Unmarshal([]byte(doc), &role); err != nil {
			return nil, err
		}
		if role.Kind == kind {
			return role.Rules, nil
		}
	}
	return nil, fmt.Errorf("no %s", kind)
}

// rbacFacts are the rules granted to the manager's ServiceAccount.
type rbacFacts struct {
	// skipped: there is no manager Deployment whose ServiceAccount to
	// look at.
	skipped bool
	// namespace and account name the ServiceAccount.
	namespace, account string
	// relinkSecrets: the manager runs with --relink-secrets.
	relinkSecrets bool
	// clusterRules are granted in every namespace (ClusterRoleBindings),
	// namespaceRules in the manager's (its RoleBindings).
	clusterRules, namespaceRules []rbacv1.PolicyRule
	err                          error
}

// readManagerRBAC reads the rules the roles bound to the ServiceAccount of
// Deployment d grant: one list of ClusterRoleBindings, one of the
// RoleBindings of its namespace, and one GET per role they bind.
func readManagerRBAC(ctx context.Context, c client.Reader, d *appsv1.Deployment) rbacFacts {
	if d == nil {
		return rbacFacts{skipped: true}
	}
	f := rbacFacts{namespace: d.Namespace, account: cmp.Or(d.Spec.Template.Spec.ServiceAccountName, "default"),
		relinkSecrets: readManagerFlags(d.Spec.Template.Spec.Containers).relinkSecrets}
	var crbs rbacv1.ClusterRoleBindingList
	if err := c.List(ctx, &crbs); err != nil {
		f.err = inventory.ListError(err, "clusterrolebindings", rbacv1.GroupName, "")
		return f
	}
	for _, b := range crbs.Items {
		if !bindsAccount(b.Subjects, f.namespace, f.account) {
			continue
		}
		rules, err := roleRules(ctx, c, "", b.RoleRef)
		if err != nil {
			f.err = err
			return f
		}
		f.clusterRules = append(f.clusterRules, rules...)
	}
	var rbs rbacv1.RoleBindingList
	if err := c.List(ctx, &rbs, client.InNamespace(f.namespace)); err != nil {
		f.err = inventory.ListError(err, "rolebindings", rbacv1.GroupName, f.namespace)
		return f
	}
	for _, b := range rbs.Items {
		if !bindsAccount(b.Subjects, f.namespace, f.account) {
			continue
		}
		rules, err := roleRules(ctx, c, f.namespace, b.RoleRef)
		if err != nil {
			f.err = err
			return f
		}
		f.namespaceRules = append(f.namespaceRules, rules...)
	}
	return f
}

// roleRules reads the rules of the role ref names (a Role of namespace
// ns, or a ClusterRole); a role that does not exist grants nothing.
func roleRules(ctx context.Context, c client.Reader, ns string, ref rbacv1.RoleRef) ([]rbacv1.PolicyRule, error) {
	var (
		obj   client.Object
		rules *[]rbacv1.PolicyRule
	)
	switch ref.Kind {
	case "ClusterRole":
		r := &rbacv1.ClusterRole{}
		obj, rules, ns = r, &r.Rules, ""
	case "Role":
		r := &rbacv1.Role{}
		obj, rules = r, &r.Rules
	default:
		return nil, nil
	}
	err := c.Get(ctx, client.ObjectKey{Namespace: ns, Name: ref.Name}, obj)
	switch {
	case apierrors.IsNotFound(err):
		return nil, nil
	case err != nil:
		resource := strings.ToLower(ref.Kind) + "s"
		return nil, inventory.GetError(err, strings.ToLower(ref.Kind), resource, rbacv1.GroupName, ns, ref.Name)
	}
	return *rules, nil
}

// bindsAccount tells that subjects include the ServiceAccount ns/name,
// by itself or by a group it is in.
func bindsAccount(subjects []rbacv1.Subject, ns, name string) bool {
	return slices.ContainsFunc(subjects, func(s rbacv1.Subject) bool {
		switch s.Kind {
		case rbacv1.ServiceAccountKind:
			return s.Name == name && s.Namespace == ns
		case rbacv1.GroupKind:
			return s.Name == "system:serviceaccounts" || s.Name == "system:serviceaccounts:"+ns || s.Name == "system:authenticated"
		}
		return false
	})
}

// missingRules lists what of want no rule of granted grants, as
// "VERB RESOURCE" (the resource qualified by its API group), in want's
// order. A granted rule covers a verb on a resource when its API groups,
// resources and verbs hold them or "*", and it names no resourceNames.
func missingRules(want, granted []rbacv1.PolicyRule) []string {
	var missing []string
	for _, w := range want {
		for _, g := range w.APIGroups {
			for _, r := range w.Resources {
				for _, v := range w.Verbs {
					if !slices.ContainsFunc(granted, func(rule rbacv1.PolicyRule) bool { return grants(rule, g, r, v) }) {
						missing = append(missing, v+" "+qualifiedResource(r, g))
					}
				}
			}
		}
	}
	return missing
}

func grants(rule rbacv1.PolicyRule, group, resource, verb string) bool {
	has := func(list []string, v string) bool { return slices.Contains(list, "*") || slices.Contains(list, v) }
	return len(rule.ResourceNames) == 0 && has(rule.APIGroups, group) && has(rule.Resources, resource) && has(rule.Verbs, verb)
}

// qualifiedResource is resource.group, or resource for the core group.
func qualifiedResource(resource, group string) string {
	if group == "" {
		return resource
	}
	return resource + "." + group
}

// judgeRBAC judges the rules granted to the manager's ServiceAccount
// against the shipped ones: those of the ClusterRole in every namespace,
// those of the Role in the manager's.
func judgeRBAC(f rbacFacts) DoctorCheck {
	c := DoctorCheck{Name: "manager-rbac"}
	switch {
	case f.skipped:
		c.Status, c.Detail = CheckSkipped, "no manager Deployment whose ServiceAccount to look at (see manager)"
		return c
	case f.err != nil:
		return unknownCheck(c.Name, f.err)
	}
	sh, err := shipped()
	if err != nil { // the binary's own files: a build that cannot read them is broken
		return unknownCheck(c.Name, err)
	}
	account := fmt.Sprintf("ServiceAccount %s/%s", f.namespace, f.account)
	want, files := sh.cluster, "config/rbac"
	if f.relinkSecrets {
		want, files = slices.Concat(want, sh.relinkSecrets), "config/rbac and config/relink-secrets"
	}
	var problems []string
	if m := missingRules(want, f.clusterRules); len(m) > 0 {
		problems = append(problems, "in every namespace: "+strings.Join(m, ", "))
	}
	if m := missingRules(sh.namespace, slices.Concat(f.clusterRules, f.namespaceRules)); len(m) > 0 {
		problems = append(problems, fmt.Sprintf("in namespace %s: %s", f.namespace, strings.Join(m, ", ")))
	}
	if len(problems) == 0 {
		c.Status, c.Detail = CheckOK, fmt.Sprintf("%s is granted every rule of %s", account, files)
		return c
	}
	c.Status = CheckFail
	c.Detail = fmt.Sprintf("%s lacks rules of %s: %s", account, files, strings.Join(problems, "; "))
	install := "install.yaml"
	if f.relinkSecrets {
		install = "install-relink-secrets.yaml"
	}
	c.Remedy = fmt.Sprintf("apply %s of the release (kubectl apply --server-side -f %s), or grant %s what it lacks", files, install, account)
	return c
}
