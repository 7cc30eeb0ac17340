package engine

import "time"

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
		d.HeldBefore = heldBefore(o)
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
