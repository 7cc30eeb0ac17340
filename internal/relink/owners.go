package relink

import (
	"context"
	"fmt"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/klog/v2"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// judgeCached judges every recorded owner of obj (Judge) on the
// relinker's cache, which only says when it is worth asking: an owner of a
// watched kind that the cache does not show, or shows not proven or being
// deleted, waits for the watch event that changes it, without a request.
// It returns the judgements, what reading each owner takes, and, in the
// annotation's order, the owners to read live (confirm): those the cache
// shows proven, and every owner of a kind not watched. Only a UID read
// live is ever written, so a cache that lags behind a deletion cannot have
// the relinker link an object to an owner that was gone before the object
// was created.
func (r *Relinker) judgeCached(ctx context.Context, k *kind, obj client.Object, owners []OwnerRef) ([]Judgement, []ownerTarget, []int, error) {
	out := make([]Judgement, len(owners))
	targets := make([]ownerTarget, len(owners))
	var live []int
	for i, o := range owners {
		t, err := ownerKind(r.mapper, r.byGK, obj, o)
		if err != nil {
			return nil, nil, nil, fmt.Errorf("%s %s: owner %s: %w", k.gvk.GroupKind(), klog.KObj(obj), o, err)
		}
		targets[i], out[i] = t, Judgement{Owner: o}
		switch {
		case t.unreadable != "":
			out[i] = Judgement{Owner: o, Verdict: VerdictNotFound, Why: t.unreadable}
		case t.watched != nil:
			cached := t.watched.newObject()
			if err := r.objects.Get(ctx, t.id.key, cached); apierrors.IsNotFound(err) {
				cached = nil
			} else if err != nil {
				return nil, nil, nil, fmt.Errorf("%s %s: reading owner %s from the cache: %w", k.gvk.GroupKind(), klog.KObj(obj), o, err)
			}
			if out[i] = Judge(obj, o, cached); out[i].Verdict.Links() {
				live = append(live, i)
			}
		default:
			live = append(live, i)
		}
		out[i].APIVersion = t.apiVersion
	}
	return out, targets, live, nil
}

// ownerTarget is what the relinker needs to read a recorded owner: the
// owner's kind in the version served and its key, the watched kind when it
// is one, and the apiVersion a reference is written in. unreadable says
// why the owner cannot exist, when it cannot.
type ownerTarget struct {
	id         ownerID
	watched    *kind
	apiVersion string
	unreadable string
}

// ownerKind maps a recorded owner of obj with mapper, or as the watched
// kind of byGK it is. The version recorded is kept while it is served;
// otherwise a reference is written in the version the API server prefers.
// A kind not served is no error: the owner cannot be found (the relinker's
// kindMapper bounds how often the API server is asked).
func ownerKind(mapper meta.RESTMapper, byGK map[schema.GroupKind]*kind, obj client.Object, o OwnerRef) (ownerTarget, error) {
	gk := o.GroupKind()
	t := ownerTarget{apiVersion: o.APIVersion, id: ownerID{key: types.NamespacedName{Name: o.Name}}}
	var namespaced bool
	if w, ok := byGK[gk]; ok {
		t.id.gvk, namespaced, t.watched = w.gvk, w.namespaced, w
	} else {
		m, err := mapper.RESTMapping(gk)
		if meta.IsNoMatchError(err) {
			t.unreadable = "its kind is not served by the API server"
			return t, nil
		}
		if err != nil {
			return t, err
		}
		t.id.gvk, namespaced = m.GroupVersionKind, m.Scope.Name() == meta.RESTScopeNameNamespace
	}
	if namespaced {
		if obj.GetNamespace() == "" {
			t.unreadable = "a cluster-scoped object cannot be owned by a namespaced one"
			return t, nil
		}
		t.id.key.Namespace = obj.GetNamespace()
	}
	if o.Version() != t.id.gvk.Version {
		if _, err := mapper.RESTMapping(gk, o.Version()); err != nil {
			t.apiVersion = t.id.gvk.GroupVersion().String()
		}
	}
	return t, nil
}
