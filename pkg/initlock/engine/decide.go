package engine

import (
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/initlock/initlock/pkg/initlock/internal/report"
)

// Decide is initlock's one decision function: the library, the manager and
// the CLI all call it. It is pure: it reads only its arguments.
//
// Lock's free path decides with it too, on the view its claim's
// compare-and-swap proved. The one exception is a refusal: the free path
// refuses without Decide, writing nothing, a live caller whose claim failed
// its test, the register or the Cluster having changed since the caller's
// view. A refusal needs no proof: the next call, on a fresh view, goes
// through Decide.
func Decide(o Observation, p Policy, now time.Time) Decision {
	d := Decision{Action: ActionNone, Verdict: verdict(o)}
	if o.Lock != nil && o.Lock.Problem == nil {
		d.Owner = ownerState(o.Lock, o.Cluster)
		d.Holder = o.Lock.Record.MachineName
	}
	if o.Lock == nil || o.Lock.Problem != nil || d.Verdict == VerdictConflict {
		if grantOf(o) == grantOther {
			d.Holder = o.Cluster.Grant.MachineName
		}
	}
	switch o.Intent {
	case IntentLock:
		d = decideLock(o, d)
		if o.Cluster != nil {
			d.Recreated = recreated(o, d)
			d.CompletesClaim, d.ReadCallerFirst = completesClaim(o, d), readCallerFirst(o, d)
		}
		return d
	case IntentUnlock, IntentRelease:
		return decideRelease(o, d)
	}
	return decideKeeper(o, p, now, d)
}

// grantKind is what the Cluster's grant register says to a decision.
type grantKind int

const (
	// grantNone: no grant counts: the register is empty or released,
	// names a Machine that is gone (or was created again under its name),
	// or the control plane is initialised.
	grantNone grantKind = iota
	// grantCaller: the register names the caller (IntentLock).
	grantCaller
	// grantOther: the register names another Machine, which exists.
	grantOther
	// grantDamaged: the register holds something that is not a grant.
	grantDamaged
)

// grantOf reads the grant register as it stands for the decision.
func grantOf(o Observation) grantKind {
	g := grantThatCounts(o.Cluster)
	if g == nil {
		return grantNone
	}
	switch {
	case g.Damaged():
		return grantDamaged
	case o.CallerLive != nil && g.Names(o.Cluster, o.CallerLive):
		return grantCaller
	case o.Granted != nil && g.Names(o.Cluster, o.Granted):
		return grantOther
	}
	return grantNone
}

// lockKind is what the lock's record says to a decision.
type lockKind int

const (
	// lockMissing: there is no lock.
	lockMissing lockKind = iota
	// lockCaller: the record names the caller (IntentLock).
	lockCaller
	// lockOther: the record names another Machine, which exists.
	lockOther
	// lockGone: the record names a Machine that is gone.
	lockGone
)

func lockOf(o Observation) lockKind {
	switch {
	case o.Lock == nil || o.Lock.Problem != nil:
		return lockMissing
	case o.CallerLive != nil && o.Lock.Record.Names(o.Cluster, o.CallerLive):
		return lockCaller
	case o.Holder != nil && o.Lock.Record.Names(o.Cluster, o.Holder):
		return lockOther
	}
	return lockGone
}

// errDamagedGrant is the decision error for a damaged grant register.
var errDamagedGrant = fmt.Errorf("%w: the Cluster's grant register (annotation %s) is not a grant record", report.ErrCorruptLock, GrantAnnotation)

// isDamagedGrant tells whether err is about a damaged grant register.
func isDamagedGrant(err error) bool { return errors.Is(err, errDamagedGrant) }

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

// mine tells whether token was written by this call.
func (o Observation) mine(token string) bool { return token != "" && slices.Contains(o.Tokens, token) }
