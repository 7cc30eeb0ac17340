package relink

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/klog/v2"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// confirmBatch is how many owners' live reads confirm one patch at most:
// the owners to read live are taken confirmBatch at a time, in the
// annotation's order, their reads sent together, and the references they
// prove patched before the next ones are read. Eight reads fit within
// ConfirmFor at the client rate of initlock-manager (20 per second).
const confirmBatch = 8

// confirmTries is how many times one reconcile reads an owner live at
// most: a read answered ConfirmFor or more before the patch it would
// confirm is sent again, with the other such reads of its batch.
const confirmTries = 3

// ErrOwnersNotConfirmed is returned by Reconcile when the reads of a batch
// of owners were not answered within ConfirmFor of one another in
// confirmTries tries (an API server answering some reads much later than
// others): the owners of that batch are not written, and the object is
// tried again with the controller's backoff.
var ErrOwnersNotConfirmed = errors.New("owners' live reads were not answered within ConfirmFor of the patch")

// relink links obj to the owners judged (judgeCached) that live lists, as
// far as their live reads prove them, in batches of confirmBatch owners
// (confirm): each batch whose reads change the references is patched as
// soon as its reads are answered, and the annotation goes in the patch of
// the last batch once every owner is linked. It fills judged with the
// judgements on the live reads, and tells whether every owner is linked.
// A patch refused for lack of permission ends it with refused's result.
func (r *Relinker) relink(ctx context.Context, k *kind, req Request, obj client.Object, judged []Judgement, targets []ownerTarget, live []int, seen time.Time) (all bool, res *ctrl.Result, err error) {
	log := ctrl.LoggerFrom(ctx)
	at := &patched{refs: obj.GetOwnerReferences(), rv: obj.GetResourceVersion()}
	for from := 0; from == 0 || from < len(live); from += confirmBatch {
		batch := live[from:min(from+confirmBatch, len(live))]
		refs, changed, demoted, err := r.confirm(ctx, k, obj, judged, targets, batch, at.refs, seen)
		if err != nil {
			return false, nil, err
		}
		for _, d := range demoted {
			log.Info("Owner recorded as controller linked without controller: the object already has a controller", "owner", d.String())
		}
		all = from+confirmBatch >= len(live) && !slices.ContainsFunc(judged, func(j Judgement) bool { return !j.Verdict.Links() })
		if !changed && !all {
			continue
		}
		if err := r.patch(ctx, k, req, obj, at, refs, changed, all); err != nil {
			if apierrors.IsForbidden(err) && !isNamespaceTerminating(err) {
				res := r.refused(ctx, k, obj, refs, err)
				return false, &res, nil
			}
			return false, nil, fmt.Errorf("%s: relinking to its owners: %w", req, err)
		}
	}
	return all, nil, nil
}

// confirm reads the owners of batch live, together, judges them again on
// those reads, and returns refs with the references they prove (link).
// Every owner whose reference it adds or corrects was read by a request
// answered less than ConfirmFor before confirm returns: an owner whose
// answer is older by then (another owner's read was slower) is read again,
// with the others in that case, by a request sent after the check, up to
// confirmTries reads of an owner; then ErrOwnersNotConfirmed.
func (r *Relinker) confirm(ctx context.Context, k *kind, obj client.Object, judged []Judgement, targets []ownerTarget, batch []int, refs []metav1.OwnerReference, seen time.Time) ([]metav1.OwnerReference, bool, []OwnerRef, error) {
	answered := make(map[int]time.Time, len(batch))
	todo := batch
	for try := 1; ; try++ {
		ids := make([]ownerID, len(todo))
		for j, i := range todo {
			ids[j] = targets[i].id
		}
		for j, read := range r.live.getAll(ctx, ids, seen) {
			i := todo[j]
			err := read.err
			if apierrors.IsForbidden(err) {
				err = fmt.Errorf("%w (add %s to the relinked kinds, or grant get on it)", err, judged[i].Owner.GroupKind())
			}
			if err != nil {
				return nil, false, nil, fmt.Errorf("%s %s: reading owner %s: %w", k.gvk.GroupKind(), klog.KObj(obj), judged[i].Owner, err)
			}
			judged[i] = Judge(obj, judged[i].Owner, read.owner)
			judged[i].APIVersion = targets[i].apiVersion
			answered[i] = read.answered
		}
		var stale []int
		now := r.opts.Clock.Now()
		for _, i := range batch {
			if _, ok := writes(refs, judged[i]); ok && now.Sub(answered[i]) >= ConfirmFor {
				stale = append(stale, i)
			}
		}
		if len(stale) == 0 {
			out, changed, demoted := link(refs, judgedOf(judged, batch))
			return out, changed, demoted, nil
		}
		if try == confirmTries {
			return nil, false, nil, fmt.Errorf("%s %s: %d owners read %d times: %w", k.gvk.GroupKind(), klog.KObj(obj), len(stale), try, ErrOwnersNotConfirmed)
		}
		todo, seen = stale, now
	}
}

// judgedOf returns the judgements of the owners of batch.
func judgedOf(judged []Judgement, batch []int) []Judgement {
	out := make([]Judgement, len(batch))
	for j, i := range batch {
		out[j] = judged[i]
	}
	return out
}
