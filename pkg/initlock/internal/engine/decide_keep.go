package engine

import (
	"time"

	"github.com/initlock/initlock/pkg/initlock/internal/report"
)

// decideKeeper decides for the manager and the CLI, which keep locks owned,
// release them once that is safe and collect orphans. They never write the
// grant register, never create a lock and never hand one to another
// Machine: every write is an adoption, an orphan's mark, or a release (the
// release mark, then the delete).
func decideKeeper(o Observation, p Policy, now time.Time, d Decision) Decision {
	d = decideKeep(o, p, now, d)
	if d.Action == ActionMarkOrphan {
		// The orphan's mark takes the marks left off in the same write,
		// unless their release is under way.
		d.Unmark = marksLeft(o) && !releaseUnderWay(o, now)
		return d
	}
	if d.Action != ActionNone || d.Err != nil || !marksLeft(o) {
		return d
	}
	if releaseUnderWay(o, now) {
		// Its delete follows; look again once it should have.
		if left := o.Lock.ReleaseStarted.Add(ReleaseMarkGrace).Sub(now); d.RequeueAfter == 0 || left < d.RequeueAfter {
			d.RequeueAfter = max(left, time.Second)
		}
		return d
	}
	// Whatever the keeper waits for, a lock it does not release now keeps
	// no mark a delete would pass with.
	d.Action = ActionUnmark
	return d
}

func decideKeep(o Observation, p Policy, now time.Time, d Decision) Decision {
	if o.Cluster != nil && o.Cluster.Paused {
		// Restores and moves bring objects back in any order: nothing is
		// decided until the Cluster is unpaused.
		d.Err, d.Wait = report.ErrClusterPaused, WaitPaused
		return d
	}
	if o.Lock == nil {
		switch {
		case grantOf(o) == grantDamaged:
			d.Err, d.Wait = errDamagedGrant, WaitPerson
		case d.Verdict == VerdictLost:
			d.Wait = WaitLockRecreated
		}
		return d
	}
	if o.Lock.Problem != nil {
		d.Err, d.Wait = o.Lock.Problem, WaitPerson
		return d
	}
	if o.Lock.Deleting {
		// Another controller's finalizer holds it; it goes by itself.
		d.Wait = WaitDeleting
		return d
	}
	lk := o.Lock
	switch {
	case o.Cluster == nil:
		return decideOrphan(o, p, now, d)
	case o.Cluster.Deleting && (o.Holder != nil || grantOf(o) != grantNone):
		// The Cluster is not gone yet, and a stock provider still grants
		// its lock: the lock stays while the Machine it names, or a grant,
		// exists (Cluster API deletes the Machines before the Cluster).
		d.Wait = WaitHolder
		return d
	case o.Cluster.Deleting:
		// The garbage collector may not delete it (the admission policy
		// refuses its delete) and no Machine relies on it: release it
		// with its Cluster, once Confirm has read the holder live.
		d.Action, d.Reason = ActionRelease, ReasonClusterDeleting
		return d
	case o.Cluster.Initialized && p.ReleaseAfterInit:
		d.Action, d.Reason = ActionRelease, ReasonInitialized
		return d
	case d.Verdict == VerdictCorrupt:
		d.Err, d.Wait = errDamagedGrant, WaitPerson
		return d
	case d.Verdict == VerdictStaleHolder && grantOf(o) == grantNone:
		// Its holder is gone and no grant protects another Machine: let
		// the next Machine take it, as a provider releasing a gone
		// holder's lock would, once Confirm has read the holder live. A
		// lock or a Cluster younger than the grace period may have been
		// restored ahead of its holder (a restore brings the Cluster, and
		// the lock unless it was kept, back before the Machines): it
		// waits for it first.
		if until := restoredSince(lk, o.Cluster).Add(p.OrphanGrace); until.After(now) {
			d.RequeueAfter, d.Wait, d.WaitUntil = until.Sub(now), WaitHolderRestore, until
			return d
		}
		d.Action, d.Reason = ActionRelease, ReasonHolderGone
		return d
	case needsAdoption(lk, d.Owner) && !o.OutOfScope:
		d.Action = ActionAdopt
	}
	switch d.Verdict {
	case VerdictConflict:
		d.Wait = WaitPerson
	case VerdictStaleHolder:
		// The grant register names another Machine: the next Lock of a
		// provider using initlock hands the lock to it.
		d.Wait = WaitTakeOver
	}
	return d
}

// decideOrphan decides on a lock whose Cluster does not exist: its
// absence is recorded on it once it has lasted the settle time, and it is
// collected once the grace period has passed since and its holder Machine
// is gone (read live, by Confirm).
func decideOrphan(o Observation, p Policy, now time.Time, d Decision) Decision {
	d.Reason = ReasonOrphan
	since := o.Lock.ClusterAbsentSince
	if since == nil {
		if until, wait := settled(o, p, now); wait {
			d.RequeueAfter, d.Wait, d.WaitUntil = until.Sub(now), WaitSettle, until
			return d
		}
		// The mark records the first sight, so that the settle time
		// does not lengthen the grace period.
		d.Action, d.RequeueAfter = ActionMarkOrphan, max(absentFrom(o, now).Add(p.OrphanGrace).Sub(now), time.Second)
		return d
	}
	until := since.Add(p.OrphanGrace)
	if left := until.Sub(now); left > 0 {
		d.RequeueAfter, d.Wait, d.WaitUntil = left, WaitGrace, until
		return d
	}
	if o.Holder == nil {
		d.Action = ActionCollect
		return d
	}
	// The holder exists: a restore may still be bringing the Cluster
	// back. Look again after another grace period.
	d.RequeueAfter, d.Wait = p.OrphanGrace, WaitHolder
	return d
}

// settled returns when the lock's absence may be recorded, and whether
// that is still to come: Policy.OrphanSettle (at most OrphanGrace) after
// the keeper first saw the lock without its Cluster.
func settled(o Observation, p Policy, now time.Time) (time.Time, bool) {
	if p.OrphanSettle <= 0 {
		return now, false
	}
	until := absentFrom(o, now).Add(min(p.OrphanSettle, p.OrphanGrace))
	return until, until.After(now)
}

// absentFrom is since when the keeper has seen the lock without its
// Cluster (Observation.AbsentSince), now when it has not said, and never
// later than now.
func absentFrom(o Observation, now time.Time) time.Time {
	if o.AbsentSince != nil && o.AbsentSince.Before(now) {
		return *o.AbsentSince
	}
	return now
}

// marksLeft tells whether the lock carries a mark that lets its delete
// through (its release mark, clusterctl move's delete-for-move) while no
// move of it may be under way: its Cluster is not paused (a move pauses it
// first, and deletes a Cluster's objects before the Cluster), and its
// control plane is not initialised. A releaser stopped between the mark
// and the delete, a move that failed, a backup taken meanwhile and
// restored, or a person's mark leave one; a release under way
// (releaseUnderWay) is given its grace first. The lock is a usable one,
// not being deleted.
func marksLeft(o Observation) bool {
	l := o.Lock
	if l == nil || l.Problem != nil || l.Deleting || (!l.Releasable && !l.MoveMark) {
		return false
	}
	c := o.Cluster
	return c == nil || (!c.Paused && !c.Initialized)
}

// releaseUnderWay tells whether a release that marked the lock is under
// way: it began less than ReleaseMarkGrace ago (ReleaseStartedAnnotation),
// and deletes the lock right after its mark. A releaser's clock ahead of
// the keeper's counts for as much as the grace at most.
func releaseUnderWay(o Observation, now time.Time) bool {
	at := o.Lock.ReleaseStarted
	return at != nil && now.Sub(*at) < ReleaseMarkGrace && at.Sub(now) < ReleaseMarkGrace
}

// restoredSince is when a restore that brought a gone holder's lock or its
// Cluster back may have begun: the later of their creations.
func restoredSince(l *Lock, c *Cluster) time.Time {
	if c.Created.After(l.Created) {
		return c.Created
	}
	return l.Created
}
