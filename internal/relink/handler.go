package relink

import (
	"context"

	velerov1 "github.com/vmware-tanzu/velero/pkg/apis/velero/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/workqueue"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"

	"github.com/initlock/initlock/pkg/initlock/capi"
)

// indexField indexes objects that carry Annotation by the owners it records
// and by their cluster-name label, so that an owner appearing, or a Cluster
// being unpaused, finds the objects waiting for it.
const indexField = "initlock.dev/relink"

func ownerIndexValue(gk schema.GroupKind, name string) string {
	return "owner:" + gk.String() + "/" + name
}

func clusterIndexValue(name string) string { return "cluster:" + name }

func indexValues(obj client.Object) []string {
	value, ok := obj.GetAnnotations()[Annotation]
	if !ok {
		return nil
	}
	owners, err := Decode(value)
	if err != nil {
		return nil
	}
	out := make([]string, 0, len(owners)+1)
	for _, o := range owners {
		out = append(out, ownerIndexValue(o.GroupKind(), o.Name))
	}
	if c := obj.GetLabels()[capi.ClusterNameLabel]; c != "" {
		out = append(out, clusterIndexValue(c))
	}
	return out
}

func annotated(obj client.Object) bool {
	if obj == nil {
		return false
	}
	_, ok := obj.GetAnnotations()[Annotation]
	return ok
}

type queue = workqueue.TypedRateLimitingInterface[Request]

// handlerFor maps the events of kind k: an object carrying the annotation
// is reconciled itself, an object appearing or labelled by another restore
// is looked up as an owner, and a Cluster being unpaused releases the
// objects that belong to it. An object that loses the annotation or is
// deleted is only dropped from the bookkeeping: there is nothing to
// reconcile.
func (r *Relinker) handlerFor(k *kind) handler.TypedEventHandler[client.Object, Request] {
	self := func(obj client.Object, q queue) {
		q.Add(Request{GVK: k.gvk, NamespacedName: client.ObjectKeyFromObject(obj)})
	}
	return handler.TypedFuncs[client.Object, Request]{
		CreateFunc: func(ctx context.Context, e event.TypedCreateEvent[client.Object], q queue) {
			if annotated(e.Object) {
				self(e.Object, q)
			}
			r.enqueueDependents(ctx, q, ownerIndexValue(k.gvk.GroupKind(), e.Object.GetName()), e.Object.GetNamespace(), k.namespaced)
		},
		UpdateFunc: func(ctx context.Context, e event.TypedUpdateEvent[client.Object], q queue) {
			switch {
			case annotated(e.ObjectNew):
				self(e.ObjectNew, q)
			case annotated(e.ObjectOld):
				// Linked (by the relinker's own patch, usually) or the
				// annotation removed: nothing left to reconcile.
				r.forget(Request{GVK: k.gvk, NamespacedName: client.ObjectKeyFromObject(e.ObjectNew)}, true)
			}
			ns := e.ObjectNew.GetNamespace()
			unpaused := k.cluster && isPaused(e.ObjectOld) && !isPaused(e.ObjectNew)
			if unpaused {
				r.enqueueDependents(ctx, q, clusterIndexValue(e.ObjectNew.GetName()), ns, true)
			}
			if unpaused || restoreOf(e.ObjectOld) != restoreOf(e.ObjectNew) {
				// Unpaused, or labelled by a restore that updated it
				// (--existing-resource-policy=update): the link rule may
				// now prove it the owner of objects of that restore.
				r.enqueueDependents(ctx, q, ownerIndexValue(k.gvk.GroupKind(), e.ObjectNew.GetName()), ns, k.namespaced)
			}
		},
		DeleteFunc: func(_ context.Context, e event.TypedDeleteEvent[client.Object], _ queue) {
			r.forget(Request{GVK: k.gvk, NamespacedName: client.ObjectKeyFromObject(e.Object)}, true)
		},
	}
}

// restoreOf returns the restore an object's label names.
func restoreOf(obj client.Object) string { return obj.GetLabels()[velerov1.RestoreNameLabel] }

func isPaused(obj client.Object) bool {
	u, ok := obj.(*unstructured.Unstructured)
	return ok && capi.IsPaused(u)
}

// enqueueDependents adds every cached object whose index holds value: in
// namespace ns when the owner is namespaced, else in every namespace.
func (r *Relinker) enqueueDependents(ctx context.Context, q queue, value, ns string, namespacedOwner bool) {
	for _, d := range r.kinds {
		opts := []client.ListOption{client.MatchingFields{indexField: value}, client.UnsafeDisableDeepCopy}
		if namespacedOwner {
			if !d.namespaced {
				continue
			}
			opts = append(opts, client.InNamespace(ns))
		}
		list := d.newList()
		if err := r.cache.List(ctx, list, opts...); err != nil {
			ctrl.LoggerFrom(ctx).Error(err, "Listing the objects waiting for an owner", "kind", d.gvk.GroupKind().String())
			continue
		}
		_ = meta.EachListItem(list, func(o runtime.Object) error {
			if m, err := meta.Accessor(o); err == nil {
				q.Add(Request{GVK: d.gvk, NamespacedName: types.NamespacedName{Namespace: m.GetNamespace(), Name: m.GetName()}})
			}
			return nil
		})
	}
}
