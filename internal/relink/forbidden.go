package relink

import (
	"context"
	"fmt"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// The messages of the admission plugin OwnerReferencesPermissionEnforcement
// of kube-apiserver (plugin/pkg/admission/gc).
const (
	// gcCannotDelete: changing ownerReferences needs delete on the object.
	gcCannotDelete = "cannot set an ownerRef on a resource you can't delete"
	// gcCannotSetFinalizers: setting blockOwnerDeletion needs update on
	// the owner's finalizers subresource.
	gcCannotSetFinalizers = "cannot set blockOwnerDeletion if an ownerReference refers to a resource you can't set finalizers on"
)

// refused handles a relink patch refused with 403 Forbidden: the object is
// left as it was (the patch is one write, refused whole), a Warning event
// names the missing permission, the forbidden metric counts the refusal,
// and the object is looked at again after Options.MaxBackoff, by when the
// permission may have been granted. Other objects are not affected.
func (r *Relinker) refused(ctx context.Context, k *kind, obj client.Object, refs []metav1.OwnerReference, err error) ctrl.Result {
	missing := r.missingPermissions(k, obj, refs, err)
	r.metrics.forbidden.WithLabelValues(k.gvk.Group, k.gvk.Kind).Inc()
	ctrl.LoggerFrom(ctx).Error(err, "Relink refused for lack of permission", "missingPermissions", missing, "retryAfter", r.opts.MaxBackoff)
	r.recorder.Eventf(obj, nil, corev1.EventTypeWarning, ReasonRelinkForbidden, "Relink",
		"Cannot restore the ownerReferences: the relinker lacks permission to %s; grant it to initlock-manager's ClusterRole. Retrying every %s",
		strings.Join(missing, " and "), r.opts.MaxBackoff)
	return ctrl.Result{RequeueAfter: r.opts.MaxBackoff}
}

// missingPermissions tells from the refusal which permissions the relinker
// lacks, each written "verb resource in group g".
func (r *Relinker) missingPermissions(k *kind, obj client.Object, refs []metav1.OwnerReference, err error) []string {
	msg := err.Error()
	switch {
	case strings.Contains(msg, gcCannotDelete):
		return []string{permission("delete", r.resourceOf(k.gvk.GroupKind()), k.gvk.Group)}
	case strings.Contains(msg, gcCannotSetFinalizers):
		var out []string
		for _, ref := range newBlockingRefs(obj.GetOwnerReferences(), refs) {
			gv, _ := schema.ParseGroupVersion(ref.APIVersion)
			gk := schema.GroupKind{Group: gv.Group, Kind: ref.Kind}
			if p := permission("update", r.resourceOf(gk)+"/finalizers", gk.Group); !slices.Contains(out, p) {
				out = append(out, p)
			}
		}
		if len(out) > 0 {
			return out
		}
	}
	return []string{permission("patch", r.resourceOf(k.gvk.GroupKind()), k.gvk.Group)}
}

// newBlockingRefs returns the references of refs with blockOwnerDeletion
// that existing does not already hold with it: those whose owners'
// finalizers the admission plugin checks.
func newBlockingRefs(existing, refs []metav1.OwnerReference) []metav1.OwnerReference {
	var out []metav1.OwnerReference
	for _, ref := range refs {
		if !ptr.Deref(ref.BlockOwnerDeletion, false) {
			continue
		}
		if !slices.ContainsFunc(existing, func(e metav1.OwnerReference) bool {
			return e.UID == ref.UID && ptr.Deref(e.BlockOwnerDeletion, false)
		}) {
			out = append(out, ref)
		}
	}
	return out
}

// resourceOf returns the lower-case plural resource of gk, or the lower-case
// kind when the API server does not serve it.
func (r *Relinker) resourceOf(gk schema.GroupKind) string {
	if m, err := r.mapper.RESTMapping(gk); err == nil {
		return m.Resource.Resource
	}
	return strings.ToLower(gk.Kind)
}

// permission writes a permission as the Warning event names it, e.g.
// update machinesets/finalizers in group cluster.x-k8s.io; the core group
// is written "".
func permission(verb, resource, group string) string {
	if group == "" {
		group = `""`
	}
	return fmt.Sprintf("%s %s in group %s", verb, resource, group)
}

// isNamespaceTerminating tells whether err refuses a write into a namespace
// being deleted, which is a 403 too but no lack of permission.
func isNamespaceTerminating(err error) bool {
	return apierrors.HasStatusCause(err, corev1.NamespaceTerminatingCause)
}
