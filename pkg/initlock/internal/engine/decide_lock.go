package engine

import "github.com/initlock/initlock/pkg/initlock/internal/report"

// decideLock decides for a Machine calling Lock. A lock is free only when
// neither protection holds it: the lock's record names no existing Machine
// other than the caller, and the grant register names no existing Machine
// other than the caller. The caller holds the lock without writing only
// when both name it exactly (by UID) with the same token: the token of one
// acquisition, written into both by that acquisition alone. Otherwise it
// claims the register (a compare-and-swap against the value read, with a
// fresh token, that also tests that the Cluster is not paused) and, once
// the claim is written, writes the lock with the same token; it holds the
// lock when both writes succeed.
func decideLock(o Observation, d Decision) Decision {
	if decided, done := decideByState(o, d); done {
		return decided
	}
	g, lk := grantOf(o), lockOf(o)
	switch {
	case g == grantDamaged:
		d.Err, d.Wait = errDamagedGrant, WaitPerson
		return d
	case o.Cluster.Initialized:
		return decideAfterInit(o, d, lk)
	case g == grantOther:
		return decideGrantedOther(o, d, lk)
	case lk == lockOther:
		return decideHeldByOther(o, d, g)
	}
	return decideForCaller(o, d, g, lk)
}

// decideByState decides, when done, a Lock that the state of the Cluster,
// the caller or the lock settles before the two protections are weighed:
// no Cluster, a paused one, a caller's object that is not the live
// Machine, a ConfigMap that is not a usable lock, a lock being deleted.
func decideByState(o Observation, d Decision) (Decision, bool) {
	switch {
	case o.Cluster == nil:
		d.Err = report.ErrClusterGone
		return d, true
	case o.Cluster.Paused:
		// Nothing is written to a paused Cluster's lock or register: a
		// grant this call claimed stays, naming the caller, until it calls
		// again.
		d.Err, d.Wait = report.ErrClusterPaused, WaitPaused
		return d, true
	case !sameMachine(o.Caller, o.CallerLive):
		// A grant this call claimed for the stale object is withdrawn.
		d.Err = report.ErrStaleMachine
		d.Register = withdrawOwn(o)
		return d, true
	case o.Lock != nil && o.Lock.Problem != nil:
		d.Err, d.Wait = o.Lock.Problem, WaitPerson
		d.Register = withdrawOwn(o)
		return d, true
	case o.Lock != nil && o.Lock.Deleting:
		// A lock being deleted (another controller's finalizer holds it)
		// counts as held by the Machine its record names until it is gone:
		// it is never taken over, adopted or handed on. Its holder relies
		// on it as on any lock.
		d.Wait, d.Holder = WaitDeleting, o.Lock.Record.MachineName
		if grantOf(o) == grantCaller && lockOf(o) == lockCaller && relied(o) {
			d.Acquired = true
			return d, true
		}
		d.Register = withdrawOwn(o)
		return d, true
	}
	return d, false
}

// decideAfterInit decides a Lock once the control plane is initialised:
// grants no longer count and are not written: the lock alone decides, as
// upstream.
func decideAfterInit(o Observation, d Decision, lk lockKind) Decision {
	switch lk {
	case lockOther:
		return d
	case lockMissing:
		d.Action = ActionCreate
	case lockGone:
		d.Action = ActionTakeOver
	case lockCaller:
		if needsAdoption(o.Lock, d.Owner) {
			d.Action = ActionAdopt
		}
	}
	d.Acquired, d.Holder = true, o.CallerLive.Name
	return d
}

// decideGrantedOther decides a Lock while the register protects another
// Machine: give it the lock back when it is missing, names a gone Machine
// or was written by this call, which had not found the lock naming the
// caller when it began. A lock naming the caller from before this call (an
// upstream lock, an earlier acquisition), or another existing Machine,
// protects that Machine: nobody is granted the lock until one of them is
// gone (a conflict).
func decideGrantedOther(o Observation, d Decision, lk lockKind) Decision {
	d.Holder = o.Cluster.Grant.MachineName
	switch {
	case lk == lockMissing:
		d.Action = ActionRecreate
	case lk == lockGone || (lk == lockCaller && o.mine(o.Lock.Record.Token) && !d.HeldBefore):
		d.Action = ActionYield
	}
	return d
}

// decideHeldByOther decides a Lock while the lock protects another Machine
// (an upstream lock, or one whose grant was lost): the caller is refused. A
// grant of the caller's that the lock does not carry was never completed
// into a lock (an earlier call refused while the Cluster was paused, say):
// it is withdrawn too, so that the Machine the lock names is not kept out
// by it for good.
func decideHeldByOther(o Observation, d Decision, g grantKind) Decision {
	d.Holder = o.Lock.Record.MachineName
	d.Register = withdrawOwn(o)
	if d.Register == RegisterNone && g == grantCaller && unfinishedGrant(o) {
		d.Register = RegisterWithdraw
	}
	return d
}

// decideForCaller decides a Lock when neither protection holds another
// existing Machine: the caller holds the lock as it stands, completes the
// claim this call made, or claims the register and writes the lock, both
// with a fresh token.
func decideForCaller(o Observation, d Decision, g grantKind, lk lockKind) Decision {
	caller := o.CallerLive
	switch {
	case g == grantCaller && lk == lockCaller && relied(o):
		// A release mark is taken off with the adoption: the lock is held
		// again, and the admission policy keeps it.
		d.Acquired, d.Holder = true, caller.Name
		if needsAdoption(o.Lock, d.Owner) || o.Lock.Releasable {
			d.Action = ActionAdopt
		}
		if t := o.Lock.Record.Token; t != "" {
			d.Landed = o.LostWrites[t].Action
		}
		return d
	case g == grantCaller && o.mine(o.Cluster.Grant.Token) && o.Cluster.Grant.Exact(o.Cluster, caller):
		// This call's claim stands, for this very Cluster and Machine (its
		// answer was lost, or the lock's write was): the call completes it,
		// writing the lock with the claim's token. The claim tested the
		// pause, and the read that shows it shows the Cluster unpaused.
		d.Action = ActionTakeOver
		if lk == lockMissing {
			d.Action = ActionCreate
		}
		if d.Verdict == VerdictLost {
			// The grant found is this call's own claim: no lock was lost.
			d.Verdict = VerdictFree
		}
		d.Acquired, d.Holder = true, caller.Name
		return d
	}
	// Neither protection holds another existing Machine: claim the register
	// and write the lock, both with a fresh token.
	d.Register, d.Action = RegisterClaim, ActionTakeOver
	if lk == lockMissing {
		d.Action = ActionCreate
	}
	d.Acquired, d.Holder = true, caller.Name
	return d
}

// relied tells whether the caller holds the lock as it stands: the register
// and the lock name it exactly, with the same token.
func relied(o Observation) bool {
	g, r := o.Cluster.Grant, o.Lock.Record
	return g.Token != "" && g.Token == r.Token &&
		g.Exact(o.Cluster, o.CallerLive) && r.Exact(o.Cluster, o.CallerLive)
}

// unfinishedGrant tells whether the register holds a grant written for the
// caller's very Machine (both UIDs) that the lock does not carry, the lock
// having been written by initlock for another Machine (it carries a token,
// or was handed over), and no write of the lock this call made may still
// complete it. Such a grant was never completed into a lock: had an
// acquisition of the caller's completed, the lock would carry its token,
// and initlock writes a lock for another Machine only while the register
// does not name an existing caller. So the caller is not running init
// under it. A lock an upstream provider wrote is another matter: upstream
// providers do not read the register, and may have created it after the
// caller's lock was lost while the caller was running init; the grant then
// stays.
func unfinishedGrant(o Observation) bool {
	g, r := o.Cluster.Grant, o.Lock.Record
	return !o.Uncertain && g.Exact(o.Cluster, o.CallerLive) && g.Token != r.Token && (r.Token != "" || r.HandedOverBy != "")
}

// withdrawOwn withdraws a grant this call recorded, when the call is not
// granted the lock, provided no write of the lock this call made may still
// be applied: otherwise a later call could find the grant and that lock
// together and rely on them while the withdrawal is still on its way.
//
// A claim of this call that the register does not show, but whose answer
// was lost, may still be applied: the register is then fenced, with a
// release written against the value read, so that the late claim's test
// fails and leaves no grant that nobody was told about. No lock carries the
// fence's token, so nothing relies on it.
func withdrawOwn(o Observation) RegisterOp {
	if o.Cluster == nil {
		return RegisterNone
	}
	g := o.Cluster.Grant
	switch {
	case g.Held() && o.mine(g.Token):
		if o.Uncertain {
			return RegisterNone
		}
		return RegisterWithdraw
	case o.ClaimUncertain && !g.Held() && !g.Damaged():
		return RegisterWithdraw
	}
	return RegisterNone
}

// heldBefore tells whether the lock named the caller before this call
// wrote it: on the call's first read, a usable record naming the caller
// that the call did not write (an upstream lock of the caller's, or its own
// from an earlier call); later, what the first read found.
func heldBefore(o Observation) bool {
	return o.HeldBefore || (o.FirstRead && lockOf(o) == lockCaller && !o.mine(o.Lock.Record.Token))
}

// recreated tells whether a Lock decision gives a lock that was lost while
// granted back to its granted holder: it creates the missing lock for the
// caller the register names from an earlier call (the lock is lost,
// VerdictLost), or for
// another Machine the register names, or hands over a lock this call wrote
// to the Machine the register names.
func recreated(o Observation, d Decision) bool {
	switch d.Action {
	case ActionCreate:
		// A call that completes its own claim creates a lock no one held:
		// its claim's answer, not a lock, was lost.
		return d.Acquired && d.Verdict == VerdictLost && !completesClaim(o, d)
	case ActionRecreate:
		return true
	case ActionYield:
		return o.Lock != nil && o.mine(o.Lock.Record.Token)
	case ActionNone:
		// A write of this call whose answer was lost landed: it recreated
		// the lock when its decision said so.
		return d.Landed != "" && o.LostWrites[o.Lock.Record.Token].Recreated
	}
	return false
}

// completesClaim tells whether a Lock decision writes the lock with the
// token of this call's own standing claim, the register's: it writes a
// record and makes no claim, and the register holds a grant this call
// wrote. A claim brings a fresh token instead, and a write with neither
// (after init) carries none.
func completesClaim(o Observation, d Decision) bool {
	writesRecord := d.Action == ActionCreate || d.Action == ActionTakeOver
	g := o.Cluster.Grant
	return d.Acquired && writesRecord && d.Register == RegisterNone && g.Held() && o.mine(g.Token)
}

// readCallerFirst tells whether a claim must wait for a live read of the
// caller's Machine, made after the Cluster was read, instead of running
// beside it: the claim replaces a grant that names the caller by name
// only (written before a restore or a move). Such a grant protects the
// restored Machine of that name, and an object read before the restore
// must never replace it with a grant to its own, stale, UID.
func readCallerFirst(o Observation, d Decision) bool {
	g := o.Cluster.Grant
	return d.Register == RegisterClaim && g.Held() && o.CallerLive != nil &&
		g.Names(o.Cluster, o.CallerLive) && !g.Exact(o.Cluster, o.CallerLive)
}
