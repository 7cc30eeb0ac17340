package relink

import (
	"context"
	"encoding/json"
	"slices"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// link returns existing with a reference to every owner judged original or
// restored by the same restore: a reference to the owner with another UID
// is replaced, and a missing one is appended; references already pointing
// at the owner's UID, and references to owners not recorded, are kept as
// they are. An owner recorded as controller is linked as controller only
// when no other reference is a controller; demoted lists those that were
// not.
func link(existing []metav1.OwnerReference, judged []Judgement) (refs []metav1.OwnerReference, changed bool, demoted []OwnerRef) {
	refs = slices.Clone(existing)
	for _, j := range judged {
		idx, ok := writes(refs, j)
		if !ok {
			continue
		}
		ref := metav1.OwnerReference{
			APIVersion:         j.APIVersion,
			Kind:               j.Owner.Kind,
			Name:               j.Owner.Name,
			UID:                j.UID,
			Controller:         cloneBool(j.Owner.Controller),
			BlockOwnerDeletion: cloneBool(j.Owner.BlockOwnerDeletion),
		}
		if j.Owner.IsController() && hasOtherController(refs, idx) {
			ref.Controller = nil
			demoted = append(demoted, j.Owner)
		}
		if idx >= 0 {
			refs[idx] = ref
		} else {
			refs = append(refs, ref)
		}
		changed = true
	}
	return refs, changed, demoted
}

// writes tells whether link writes the reference of j into refs: an owner
// judged original or restored by the same restore, that refs do not
// reference by its UID yet; idx is its reference in refs to correct, -1
// when there is none.
func writes(refs []metav1.OwnerReference, j Judgement) (idx int, ok bool) {
	if j.Verdict != VerdictOriginal && j.Verdict != VerdictSameRestore {
		return -1, false
	}
	idx = slices.IndexFunc(refs, func(r metav1.OwnerReference) bool { return keyOf(r) == j.Owner.key() })
	return idx, idx < 0 || refs[idx].UID != j.UID
}

func hasOtherController(refs []metav1.OwnerReference, skip int) bool {
	for i, r := range refs {
		if i != skip && r.Controller != nil && *r.Controller {
			return true
		}
	}
	return false
}

// patch writes the ownerReferences and, when every owner is linked, removes
// the annotation, in one JSON merge patch conditional on at, the
// object's references and resourceVersion as the relinker last read or
// patched them; at becomes the object as patched.
func (r *Relinker) patch(ctx context.Context, k *kind, req Request, obj client.Object, at *patched, refs []metav1.OwnerReference, setRefs, removeAnnotation bool) error {
	m := map[string]any{"resourceVersion": at.rv}
	if setRefs {
		m["ownerReferences"] = refs
	}
	if removeAnnotation {
		m["annotations"] = map[string]any{Annotation: nil}
	}
	body, err := json.Marshal(map[string]any{"metadata": m})
	if err != nil {
		return err
	}
	target := &metav1.PartialObjectMetadata{}
	target.SetGroupVersionKind(k.gvk)
	target.SetNamespace(obj.GetNamespace())
	target.SetName(obj.GetName())
	// Recorded before the patch: the update event it causes may be handled
	// before Patch returns, and clears the record.
	r.mu.Lock()
	r.written[req] = at.rv
	r.mu.Unlock()
	if err := r.client.Patch(ctx, target, client.RawPatch(types.MergePatchType, body)); err != nil {
		r.mu.Lock()
		delete(r.written, req)
		r.mu.Unlock()
		return err
	}
	at.refs, at.rv = target.GetOwnerReferences(), target.GetResourceVersion()
	return nil
}

// patched is an object as the relinker last read or patched it: its
// references and resourceVersion.
type patched struct {
	refs []metav1.OwnerReference
	rv   string
}
