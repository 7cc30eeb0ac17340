package inventory

import (
	"fmt"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
)

// ListError describes a failed list of resource (in API group group) in
// namespace ("" for all namespaces). When the API server refused it, the
// message names the permission that is missing and how to check it. The
// API error stays wrapped, so apierrors.IsForbidden still works.
func ListError(err error, resource, group, namespace string) error {
	return apiError(err, "list", resource, group, namespace, fmt.Sprintf("listing %s", resource))
}

// GetError describes a failed read of one object, as ListError does for a
// list.
func GetError(err error, kind, resource, group, namespace, name string) error {
	return apiError(err, "get", resource, group, namespace, fmt.Sprintf("reading %s %q", kind, name))
}

func apiError(err error, verb, resource, group, namespace, doing string) error {
	where := fmt.Sprintf("in namespace %q", namespace)
	scope, canI := "a Role in that namespace", fmt.Sprintf("kubectl auth can-i %s %s -n %s", verb, qualified(resource, group), namespace)
	if namespace == "" {
		where = "in all namespaces"
		scope, canI = "a ClusterRole", fmt.Sprintf("kubectl auth can-i %s %s -A", verb, qualified(resource, group))
	}
	if apierrors.IsForbidden(err) {
		return fmt.Errorf("%s %s: permission denied: kubectl-initlock needs %q on %q (API group %q) %s; ask an administrator to bind %s that grants it (check with '%s'): %w",
			doing, where, verb, resource, group, where, scope, canI, err)
	}
	if apierrors.IsNotFound(err) && verb == "list" && group != "" {
		return fmt.Errorf("%s %s: the API server does not serve %s.%s; are the Cluster API CRDs installed? %w", doing, where, resource, group, err)
	}
	return fmt.Errorf("%s %s: %w", doing, where, err)
}

func qualified(resource, group string) string {
	if group == "" {
		return resource
	}
	return resource + "." + group
}
