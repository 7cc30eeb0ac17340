package relink

import (
	"context"
	"fmt"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// Pending is an object that carries the Annotation: what the relinker has
// not linked yet, with the link rule's judgement of each recorded owner.
type Pending struct {
	GVK       schema.GroupVersionKind
	Namespace string
	Name      string
	Created   metav1.Time
	// Owners are the recorded owners, judged on a live read of each.
	Owners []Judgement
	// Err is why the annotation cannot be read; Owners is empty then.
	Err error
}

// FindPending reads, from the API server, the objects of kinds in
// namespace ns ("" for all) that carry the Annotation, with
// DefaultSelectors applied, as the relinker caches them; and it judges
// every owner they record on a live read of the owner, once per owner,
// with Judge, as the relinker does. A kind the API server does not serve,
// or that c may not list, is skipped: skipped says which and why. It
// writes nothing.
func FindPending(ctx context.Context, c client.Client, ns string, kinds []schema.GroupVersionKind) (pending []Pending, skipped []string, _ error) {
	read := &liveJudge{c: c, owners: map[ownerID]client.Object{}, unserved: map[schema.GroupKind]bool{}}
	for _, gvk := range kinds {
		m, err := c.RESTMapper().RESTMapping(gvk.GroupKind(), gvk.Version)
		if meta.IsNoMatchError(err) {
			skipped = append(skipped, fmt.Sprintf("%s: not served", gvk.GroupKind()))
			continue
		}
		if err != nil {
			return nil, nil, err
		}
		list := &metav1.PartialObjectMetadataList{}
		list.SetGroupVersionKind(m.GroupVersionKind.GroupVersion().WithKind(m.GroupVersionKind.Kind + "List"))
		opts := []client.ListOption{client.InNamespace(ns)}
		if sel := DefaultSelectors()[gvk.GroupKind()]; sel != nil {
			opts = append(opts, client.MatchingLabelsSelector{Selector: sel})
		}
		if err := c.List(ctx, list, opts...); apierrors.IsForbidden(err) {
			skipped = append(skipped, fmt.Sprintf("%s: may not list them", gvk.GroupKind()))
			continue
		} else if err != nil {
			return nil, nil, fmt.Errorf("listing %s: %w", gvk.GroupKind(), err)
		}
		for i := range list.Items {
			obj := &list.Items[i]
			value, ok := obj.GetAnnotations()[Annotation]
			if !ok {
				continue
			}
			p := Pending{GVK: m.GroupVersionKind, Namespace: obj.Namespace, Name: obj.Name, Created: obj.CreationTimestamp}
			recorded, err := Decode(value)
			if err != nil {
				p.Err = err
			}
			for _, o := range recorded {
				j, err := read.judge(ctx, obj, o)
				if err != nil {
					return nil, nil, fmt.Errorf("%s %s/%s: owner %s: %w", gvk.Kind, obj.Namespace, obj.Name, o, err)
				}
				p.Owners = append(p.Owners, j)
			}
			pending = append(pending, p)
		}
	}
	return pending, skipped, nil
}

// liveJudge judges owners on live reads, each owner read once and each
// kind not served looked up once.
type liveJudge struct {
	c        client.Client
	owners   map[ownerID]client.Object
	unserved map[schema.GroupKind]bool
}

func (l *liveJudge) judge(ctx context.Context, obj client.Object, o OwnerRef) (Judgement, error) {
	t := ownerTarget{unreadable: "its kind is not served by the API server"}
	if !l.unserved[o.GroupKind()] {
		var err error
		if t, err = ownerKind(l.c.RESTMapper(), nil, obj, o); err != nil {
			return Judgement{}, err
		}
		l.unserved[o.GroupKind()] = t.id.gvk.Empty()
	}
	if t.unreadable != "" {
		return Judgement{Owner: o, Verdict: VerdictNotFound, Why: t.unreadable}, nil
	}
	owner, seen := l.owners[t.id]
	if !seen {
		m := &metav1.PartialObjectMetadata{}
		m.SetGroupVersionKind(t.id.gvk)
		switch err := l.c.Get(ctx, t.id.key, m); {
		case apierrors.IsNotFound(err):
		case err != nil:
			return Judgement{}, err
		default:
			owner = m
		}
		l.owners[t.id] = owner
	}
	return Judge(obj, o, owner), nil
}
