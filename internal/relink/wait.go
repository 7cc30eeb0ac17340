package relink

import (
	"context"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// waitState is the bookkeeping of an object waiting for an owner.
type waitState struct {
	// since is when the relinker first saw the object.
	since    time.Time
	attempts int
	// unproven tells that an owner of the recorded name exists and is not
	// proven to be the backed-up one; counted by the unproven gauge.
	unproven bool
	// warned holds the event reasons already recorded on the object.
	warned map[string]bool
}

// firstSeen returns when the relinker first saw an object: when it
// started waiting, or now.
func (r *Relinker) firstSeen(req Request) time.Time {
	r.mu.Lock()
	defer r.mu.Unlock()
	if s, ok := r.waiting[req]; ok {
		return s.since
	}
	return r.opts.Clock.Now()
}

// stale tells whether the cache still holds the version of the object that
// the relinker patched.
func (r *Relinker) stale(req Request, rv string) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	from, ok := r.written[req]
	if !ok {
		return false
	}
	if from == rv {
		return true
	}
	delete(r.written, req)
	return false
}

// forget drops the bookkeeping of an object that no longer waits: linked,
// without the annotation, paused or deleted. gone also drops the record of
// the relinker's last patch, once the cache has moved past it.
func (r *Relinker) forget(req Request, gone bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if gone {
		delete(r.written, req)
	}
	if s, ok := r.waiting[req]; ok {
		delete(r.waiting, req)
		r.metrics.waiting.WithLabelValues(req.GVK.Group, req.GVK.Kind).Dec()
		if s.unproven {
			r.metrics.unproven.WithLabelValues(req.GVK.Group, req.GVK.Kind).Dec()
		}
	}
}

// wait records that obj waits for the owners judged not to link, and
// returns when to look at it again. After Options.WarnAfter a Warning
// event names each owner and why it is not linked: reason OwnerNotProven
// for owners that exist but are not proven to be the backed-up ones,
// OwnerNotFound for the others; each reason once per object.
func (r *Relinker) wait(ctx context.Context, req Request, obj client.Object, judged []Judgement, seen time.Time) ctrl.Result {
	var notFound, unproven []string
	for _, j := range judged {
		switch {
		case j.Verdict.Links():
		case j.Verdict == VerdictUnproven:
			unproven = append(unproven, j.Owner.String()+" "+j.Why)
		case j.Why == "not found":
			notFound = append(notFound, j.Owner.String())
		default:
			notFound = append(notFound, j.Owner.String()+" ("+j.Why+")")
		}
	}
	waited := r.opts.Clock.Since(obj.GetCreationTimestamp().Time)
	r.mu.Lock()
	s, ok := r.waiting[req]
	if !ok {
		s = &waitState{since: seen, warned: map[string]bool{}}
		r.waiting[req] = s
		r.metrics.waiting.WithLabelValues(req.GVK.Group, req.GVK.Kind).Inc()
	}
	if was := s.unproven; was != (len(unproven) > 0) {
		s.unproven = !was
		g := r.metrics.unproven.WithLabelValues(req.GVK.Group, req.GVK.Kind)
		if s.unproven {
			g.Inc()
		} else {
			g.Dec()
		}
	}
	s.attempts++
	backoff := r.opts.MaxBackoff
	if s.attempts < 32 {
		backoff = min(r.opts.MinBackoff<<(s.attempts-1), r.opts.MaxBackoff)
	}
	due := waited >= r.opts.WarnAfter
	warnUnproven := due && len(unproven) > 0 && !s.warned[ReasonOwnerNotProven]
	warnNotFound := due && len(notFound) > 0 && !s.warned[ReasonOwnerNotFound]
	s.warned[ReasonOwnerNotProven] = s.warned[ReasonOwnerNotProven] || warnUnproven
	s.warned[ReasonOwnerNotFound] = s.warned[ReasonOwnerNotFound] || warnNotFound
	if left := r.opts.WarnAfter - waited; left > 0 && left < backoff {
		backoff = left
	}
	r.mu.Unlock()

	ctrl.LoggerFrom(ctx).V(1).Info("Waiting for owners", "notFound", notFound, "unproven", unproven, "retryAfter", backoff)
	if warnUnproven {
		r.recorder.Eventf(obj, nil, corev1.EventTypeWarning, ReasonOwnerNotProven, "Relink",
			"Owner %s; the object stays unlinked and nothing is deleted: link it by hand if that object is its owner",
			strings.Join(unproven, "; "))
	}
	if warnNotFound {
		r.recorder.Eventf(obj, nil, corev1.EventTypeWarning, ReasonOwnerNotFound, "Relink",
			"Owner %s not found %s after restore; the object stays unlinked and nothing is deleted until it is restored",
			strings.Join(notFound, ", "), waited.Truncate(time.Second))
	}
	return ctrl.Result{RequeueAfter: backoff}
}

// Waiting returns the objects waiting for an owner, for tests and
// diagnostics.
func (r *Relinker) Waiting() []Request {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := make([]Request, 0, len(r.waiting))
	for req := range r.waiting {
		out = append(out, req)
	}
	slices.SortFunc(out, func(a, b Request) int { return strings.Compare(a.String(), b.String()) })
	return out
}
