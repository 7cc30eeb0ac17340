package engine

import (
	"errors"
	"fmt"

	"github.com/initlock/initlock/pkg/initlock/internal/report"
)

// decideRelease decides for Unlock (IntentUnlock) and for an operator's
// release (IntentRelease). It releases what the caller holds (or, with no
// caller or for an operator, whatever is held): first it retires the grant
// register's value (a new token for the same Machine, so that no earlier
// acquisition is relied on any more while the release is under way), and
// once that is written it withdraws the grant and deletes the lock, in
// parallel; the lock's delete is its release mark, then the delete. A
// ConfigMap that is not a lock is never touched; once the
// control plane is initialised the register no longer counts and is left
// as it is.
func decideRelease(o Observation, d Decision) Decision {
	anyHolder := o.Intent == IntentRelease || o.Caller == nil
	if o.Intent != IntentRelease && o.CallerCluster != "" && o.Cluster != nil && o.Cluster.UID != o.CallerCluster {
		// The caller read its Cluster before a restore, a move or a
		// re-creation: nothing it holds is known to be in this one. (An
		// operator's release is bound by the UID and resourceVersion it
		// inspected instead.)
		d.Err = report.ErrStaleCluster
		return d
	}
	if o.Intent == IntentRelease {
		d.NeedsForce, d.ForceReason = needsForce(o)
	}
	if o.Lock != nil && o.Lock.Problem != nil && (isNotALock(o.Lock.Problem) || !anyHolder) {
		d.Err = o.Lock.Problem
		return d
	}
	if o.Cluster != nil && o.Cluster.Paused {
		d.Err, d.Wait = report.ErrClusterPaused, WaitPaused
		return d
	}
	if !anyHolder && !sameMachine(o.Caller, o.CallerLive) {
		// A record written before a restore names its Machine by name: only
		// the live Machine of that name may release it, never an object of
		// an earlier incarnation.
		d.Err = report.ErrStaleMachine
		return d
	}
	if o.Intent == IntentRelease && changedSince(o) {
		// An operator's release releases what the operator inspected:
		// another writer rewrote it since.
		d.Err = errChangedSince
		return d
	}
	lockMine := o.Lock != nil && (anyHolder && foundFirst(o) || o.Lock.Record.Names(o.Cluster, o.Caller))
	g := grantThatCounts(o.Cluster)
	regMine := g != nil && (anyHolder && grantFoundFirst(o, g) || (g.Held() && g.Names(o.Cluster, o.Caller)))
	if !lockMine && !regMine {
		if o.Lock != nil && (!anyHolder || !o.Pinned) {
			d.Err = report.ErrNotHolder
		}
		return d
	}
	d.Reason = ReasonUnlock
	switch {
	case regMine && g.Held() && !o.mine(g.Token):
		d.Register = RegisterRetire
	case regMine:
		d.Register = RegisterWithdraw
		if lockMine {
			d.Action = ActionRelease
		}
	default:
		d.Action = ActionRelease
	}
	if d.Action == ActionRelease && o.Lock != nil && o.Lock.Deleting {
		d.Action = ActionNone // it is going already
	}
	if d.NeedsForce && !o.Force && d.Writes() {
		// An operator's release that may let a second Machine run init
		// goes ahead only when the operator forces it.
		d.Err, d.Action, d.Register = errNeedsForce, ActionNone, RegisterNone
	}
	return d
}

// errChangedSince refuses a later round of an operator's release once
// another writer has rewritten what its first read found.
var errChangedSince = errors.New("changed since the release read it")

// changedSince tells, in a later round of a release of whoever holds the
// lock (Observation.Pinned), that another writer has rewritten what its
// first read found for the same Machine: the lock it found (the same UID)
// names that Machine by another record, or the register names it by a
// grant neither found first nor written by this call. That Machine still
// holds what the release set out to release. A lock or a grant gone, one
// created again, or one naming another Machine now, is not: the release's
// own write, its answer lost, may have removed them, and what it set out to
// release is gone (Observation.Pinned).
func changedSince(o Observation) bool {
	if !o.Pinned {
		return false
	}
	if p := o.PinnedLock; o.Lock != nil && p != nil && o.Lock.UID == p.UID && !foundFirst(o) &&
		o.Lock.Problem == nil && p.Problem == nil && o.Lock.Record.MachineName == p.Record.MachineName {
		return true
	}
	g, first := grantThatCounts(o.Cluster), GrantFrom(map[string]string{GrantAnnotation: o.PinnedRegister})
	return g.Held() && !grantFoundFirst(o, g) && first.Held() && g.MachineName == first.MachineName
}

// errNeedsForce refuses an operator's release, made without Force, of a
// lock whose holder, or the Machine its grant names, exists while the
// control plane is not initialised.
var errNeedsForce = fmt.Errorf("%w: a Machine it names exists and the control plane is not initialised (Force releases it anyway)", report.ErrNotHolder)

// needsForce tells whether releasing the lock now may let a second Machine
// run init, and names the Machine that may be running it.
func needsForce(o Observation) (bool, string) {
	cl := o.Cluster
	if cl != nil && cl.Initialized {
		return false, ""
	}
	if o.Lock != nil && o.Lock.Problem == nil && o.Lock.Record.Claims(o.Holder) {
		return true, o.Holder.Name
	}
	if o.Lock != nil && o.Lock.Problem != nil && !isNotALock(o.Lock.Problem) {
		// A corrupt lock's holder is unknown: it may exist, whether or
		// not the Cluster does.
		return true, ""
	}
	if cl == nil {
		return false, ""
	}
	if g := cl.Grant; g.Damaged() {
		return true, ""
	}
	if g := cl.Grant; g.Held() && g.Claims(o.Granted) {
		return true, o.Granted.Name
	}
	return false, ""
}

// foundFirst tells whether the lock is the one a release of whoever holds
// it (with no Machine, or an operator's) found at its first read: the same
// ConfigMap (UID) with the same record. A later round of the release (after
// a race lost, or a write whose answer was lost) never releases a lock
// created or taken over since by another call: what it set out to release
// is gone, and the call ends as a release of it.
func foundFirst(o Observation) bool {
	if !o.Pinned {
		return true
	}
	p, l := o.PinnedLock, o.Lock
	return p != nil && l.UID == p.UID && l.Record.Ref == p.Record.Ref &&
		l.Record.Token == p.Record.Token && l.Record.HandedOverBy == p.Record.HandedOverBy
}

// grantFoundFirst tells whether grant g is the one a release of whoever
// holds the lock found at its first read (the register's exact value), or
// one this call wrote since (its retirement): never a grant another call
// recorded since.
func grantFoundFirst(o Observation, g *Grant) bool {
	return !o.Pinned || g.Raw() == o.PinnedRegister || o.mine(g.Token)
}
