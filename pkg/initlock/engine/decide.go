package engine

import (
	"errors"
	"fmt"
	"slices"
	"time"
)

// Decide is initlock's one decision function: the library, the manager and
// the CLI all call it. It is pure: it reads only its arguments.
//
// Lock's free path is the one exception, and only in what it cannot get
// wrong: it grants without Decide only when its claim's compare-and-swap
// (the register empty, the Cluster unpaused and of the UID seen), its live
// read of the caller's Machine and its create of the lock all succeed,
// which is what Decide's claim would require; and it refuses without
// Decide, writing nothing, a live caller whose claim failed its test, the
// register or the Cluster having changed since the caller's view (a
// refusal needs no proof: the next call, on a fresh view, goes through
// Decide). Everything else goes through Decide.
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
		return decideLock(o, d)
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
var errDamagedGrant = fmt.Errorf("%w: the Cluster's grant register (annotation %s) is not a grant record", ErrCorruptLock, GrantAnnotation)

// IsDamagedGrant tells whether err is about a damaged grant register.
func IsDamagedGrant(err error) bool { return errors.Is(err, errDamagedGrant) }

// mine tells whether token was written by this call.
func (o Observation) mine(token string) bool { return token != "" && slices.Contains(o.Tokens, token) }
