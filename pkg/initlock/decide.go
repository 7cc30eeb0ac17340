package initlock

import (
	"errors"
	"fmt"
	"time"

	"github.com/initlock/initlock/internal/capi"
)

// Verdict is the health of a cluster's lock.
type Verdict string

// Verdicts, from the worst down. A lock has the first that applies.
const (
	// VerdictForeign: a ConfigMap has the lock's name but is not a lock.
	VerdictForeign Verdict = "foreign"
	// VerdictCorrupt: the lock's record cannot be read.
	VerdictCorrupt Verdict = "corrupt"
	// VerdictOrphan: the lock's Cluster does not exist.
	VerdictOrphan Verdict = "orphan"
	// VerdictHeldAfterInit: the control plane is initialised, yet the lock
	// is still held.
	VerdictHeldAfterInit Verdict = "held-after-init"
	// VerdictStaleHolder: the Machine the lock names does not exist.
	VerdictStaleHolder Verdict = "stale-holder"
	// VerdictUnowned: the lock is not owned by its Cluster's current UID.
	VerdictUnowned Verdict = "unowned"
	// VerdictLost: there is no lock, but the uninitialised Cluster's grant
	// register names an existing Machine: the lock was deleted while held.
	VerdictLost Verdict = "lost"
	// VerdictHealthy: held by an existing Machine, owned by its Cluster.
	VerdictHealthy Verdict = "healthy"
	// VerdictFree: there is no lock and no grant that counts.
	VerdictFree Verdict = "free"
)

// Verdicts lists every verdict, for metrics and documentation.
var Verdicts = []Verdict{
	VerdictForeign, VerdictCorrupt, VerdictOrphan, VerdictHeldAfterInit,
	VerdictStaleHolder, VerdictUnowned, VerdictLost, VerdictHealthy, VerdictFree,
}

// OwnerState says how a lock's Cluster ownerReference stands.
type OwnerState string

// Owner states.
const (
	// OwnerOK: exactly one Cluster ownerReference, to the current UID.
	OwnerOK OwnerState = "ok"
	// OwnerMissing: no Cluster ownerReference.
	OwnerMissing OwnerState = "missing"
	// OwnerStaleUID: a Cluster ownerReference by the right name but an old
	// UID, as a restore or move leaves it.
	OwnerStaleUID OwnerState = "stale-uid"
	// OwnerWrongCluster: a Cluster ownerReference to another cluster.
	OwnerWrongCluster OwnerState = "wrong-cluster"
)

// Action is what should be done about a lock.
type Action string

// Actions. Every write is made with optimistic concurrency or preconditions.
const (
	// ActionNone: nothing to write.
	ActionNone Action = "none"
	// ActionCreate: create the lock for the caller.
	ActionCreate Action = "create"
	// ActionRecreate: create the lost lock for the Machine the grant
	// register names, not for the caller.
	ActionRecreate Action = "recreate"
	// ActionAdopt: point the Cluster ownerReference at the current UID,
	// refresh the holder's UID and drop a cluster-absent mark, in one
	// update.
	ActionAdopt Action = "adopt"
	// ActionTakeOver: the holder no longer exists, or the caller holds the
	// grant; rewrite the lock for the caller, conditional on the
	// resourceVersion read.
	ActionTakeOver Action = "take-over"
	// ActionYield: the lock names the caller or a stale holder, but the
	// grant register names another existing Machine; hand the lock to it.
	ActionYield Action = "yield"
	// ActionRelease: delete the lock, conditional on UID and
	// resourceVersion.
	ActionRelease Action = "release"
	// ActionMarkOrphan: record on the lock since when its Cluster has been
	// missing.
	ActionMarkOrphan Action = "mark-orphan"
	// ActionCollect: delete an orphan lock, conditional on UID and
	// resourceVersion.
	ActionCollect Action = "collect"
)

// Release reasons, for events and metrics.
const (
	ReasonInitialized     = "initialized"
	ReasonClusterDeleting = "cluster-deleting"
	ReasonOrphan          = "orphan"
	ReasonUnlock          = "unlock"
)

// Observation is everything Decide looks at, as read from the API server.
type Observation struct {
	// ClusterName is the cluster the lock belongs to.
	ClusterName string
	// Lock is the ConfigMap with the lock's name, or nil when there is none.
	Lock *Lock
	// Cluster is the Cluster, or nil when it does not exist. Its Grant is
	// the grant register.
	Cluster *Cluster
	// Holder is the Machine the lock names, or nil when it does not exist.
	// Only meaningful when Lock holds a valid record.
	Holder *Machine
	// Granted is the Machine the Cluster's grant register names, when that
	// Machine exists; nil when the register is empty, damaged or names a
	// Machine that does not exist.
	Granted *Machine
	// Caller is the Machine asking for the lock, or nil when the decision is
	// made for the manager or the CLI.
	Caller *Machine
}

// Policy is what the manager and the CLI are configured to do.
type Policy struct {
	// ReleaseAfterInit releases a lock once the control plane is
	// initialised.
	ReleaseAfterInit bool
	// OrphanGrace is how long a Cluster must have been missing before its
	// lock is collected.
	OrphanGrace time.Duration
}

// DefaultPolicy is the manager's default policy.
var DefaultPolicy = Policy{ReleaseAfterInit: true, OrphanGrace: 10 * time.Minute}

// Decision is the verdict on a lock and the action to take.
type Decision struct {
	Verdict Verdict
	// Owner is the ownerReference state; empty when there is no lock.
	Owner  OwnerState
	Action Action
	// Holder is the Machine that holds the lock after Action.
	Holder string
	// Acquired tells the caller that it holds the lock after Action.
	Acquired bool
	// Claim tells the caller to write its grant into the Cluster's grant
	// register (a compare-and-swap against the value observed) before
	// Action; Acquired holds only if that write succeeds.
	Claim bool
	// Reason is a fixed word for releases and collections (Reason*).
	Reason string
	// RequeueAfter is when to look again, for waits with a deadline.
	RequeueAfter time.Duration
	// Err is set when the lock cannot be used or must not be touched: it
	// wraps ErrNotALock, ErrCorruptLock or ErrClusterPaused.
	Err error
}

// Decide is initlock's one decision function: the library, the manager and
// the CLI all call it. It is pure: it reads only its arguments.
func Decide(o Observation, p Policy, now time.Time) Decision {
	if o.Lock == nil {
		return decideMissing(o)
	}
	d := Decision{Verdict: verdict(o)}
	if o.Lock.Problem != nil {
		d.Action, d.Err = ActionNone, o.Lock.Problem
		return d
	}
	d.Owner = ownerState(o.Lock, o.Cluster)
	d.Holder = o.Lock.Record.MachineName
	if o.Cluster != nil && o.Cluster.Paused {
		d.Action, d.Err = ActionNone, ErrClusterPaused
		return d
	}
	if o.Caller != nil {
		return decideCaller(o, d)
	}
	return decideKeeper(o, p, now, d)
}

func decideMissing(o Observation) Decision {
	d := Decision{Verdict: VerdictFree, Action: ActionNone}
	g, name := grantOf(o)
	if g != grantNone {
		d.Verdict, d.Holder = VerdictLost, name
	}
	if o.Caller == nil {
		return d
	}
	if o.Cluster != nil && o.Cluster.Paused {
		d.Err = ErrClusterPaused
		return d
	}
	switch g {
	case grantDamaged:
		d.Err = errDamagedGrant
	case grantOther:
		d.Action = ActionRecreate
	case grantCaller:
		d.Action, d.Acquired = ActionCreate, true
	default:
		d.Action, d.Holder, d.Acquired, d.Claim = ActionCreate, o.Caller.Name, true, claimable(o)
	}
	return d
}

// decideCaller decides for a Machine calling Lock on a valid lock.
//
// A lock the register does not arbitrate (one an upstream provider wrote,
// or any lock once the control plane is initialised) is held by the
// Machine it names while that Machine exists, whatever the register says:
// another caller is refused, and the holder keeps it and claims the
// register. Otherwise the register decides: a grant of another existing
// Machine keeps the lock for it (a lock naming anyone else is handed to
// it); the caller's own grant lets it take the lock over; with the
// register empty, or naming a Machine that is gone, the caller claims it
// and takes the lock.
func decideCaller(o Observation, d Decision) Decision {
	caller := o.Caller
	g, name := grantOf(o)
	if g == grantDamaged {
		d.Action, d.Err = ActionNone, errDamagedGrant
		return d
	}
	upstream := !arbitrated(o)
	mine := d.Holder == caller.Name
	switch {
	case !mine && o.Holder != nil && upstream:
		d.Action = ActionNone
		return d
	case mine && upstream:
		d.Claim = claimable(o) && g != grantCaller
	case g == grantOther && d.Holder == name:
		d.Action = ActionNone
		return d
	case g == grantOther:
		d.Action, d.Holder = ActionYield, name
		return d
	default:
		d.Claim = g == grantNone && claimable(o)
	}
	d.Acquired = true
	switch {
	case !mine:
		d.Action, d.Holder = ActionTakeOver, caller.Name
	case needsAdoption(o.Lock, d.Owner) || o.Lock.Record.HandedOverBy != "" ||
		(caller.UID != "" && o.Lock.Record.MachineUID != caller.UID):
		d.Action = ActionAdopt
	default:
		d.Action = ActionNone
	}
	return d
}

// grantKind is what the Cluster's grant register says to a decision.
type grantKind int

const (
	// grantNone: no grant counts: the register is empty, names a Machine
	// that is gone (or was created again under its name), or the control
	// plane is initialised.
	grantNone grantKind = iota
	// grantCaller: the register names the caller.
	grantCaller
	// grantOther: the register names another Machine, which exists.
	grantOther
	// grantDamaged: the register holds something that is not a grant.
	grantDamaged
)

// errDamagedGrant is the decision error for a damaged grant register.
var errDamagedGrant = fmt.Errorf("%w: the Cluster's grant register (annotation %s) is not a grant record", ErrCorruptLock, GrantAnnotation)

// grantOf reads the grant register as it stands for the decision, and the
// Machine it names.
func grantOf(o Observation) (grantKind, string) {
	if o.Cluster == nil || o.Cluster.Initialized || o.Cluster.Grant == nil {
		return grantNone, ""
	}
	g := o.Cluster.Grant
	switch {
	case g.Damaged():
		return grantDamaged, ""
	case o.Caller != nil && g.Names(*o.Cluster, *o.Caller):
		return grantCaller, g.MachineName
	case o.Granted != nil && g.Names(*o.Cluster, *o.Granted):
		return grantOther, g.MachineName
	}
	return grantNone, ""
}

// arbitrated tells whether the grant register decides who holds the lock:
// the lock was written by initlock's Lock (it carries the acquisition time),
// so its holder was granted it through the register, and the control plane
// is not initialised. A Machine named in such a lock but not in the
// register holds no grant: it lost the register to another caller, or is
// releasing the lock. A register may name a Machine that was never granted
// the lock (a call that claimed it failed, and so did its withdrawal), so
// it never overrides a lock it does not arbitrate.
func arbitrated(o Observation) bool {
	return claimable(o) && o.Lock != nil && o.Lock.Record.AcquiredAt != nil
}

// claimable tells whether a caller acquiring the lock records its grant:
// grants do not count, and are not written, once the control plane is
// initialised.
func claimable(o Observation) bool {
	return o.Cluster != nil && !o.Cluster.Initialized
}

// decideKeeper decides for the manager and the CLI, which keep locks owned,
// release them after init and collect orphans.
func decideKeeper(o Observation, p Policy, now time.Time, d Decision) Decision {
	d.Action = ActionNone
	switch {
	case o.Cluster == nil:
		d.Reason = ReasonOrphan
		since := o.Lock.ClusterAbsentSince
		if since == nil {
			d.Action, d.RequeueAfter = ActionMarkOrphan, p.OrphanGrace
			return d
		}
		if left := since.Add(p.OrphanGrace).Sub(now); left > 0 {
			d.RequeueAfter = left
			return d
		}
		if o.Holder == nil {
			d.Action = ActionCollect
			return d
		}
		// The holder exists: a restore may still be bringing the Cluster
		// back. Look again after another grace period.
		d.RequeueAfter = p.OrphanGrace
		return d
	case o.Cluster.Deleting:
		if d.Owner != OwnerOK {
			// The garbage collector will not take an unowned lock.
			d.Action, d.Reason = ActionRelease, ReasonClusterDeleting
		}
		return d
	case o.Cluster.Initialized && p.ReleaseAfterInit:
		d.Action, d.Reason = ActionRelease, ReasonInitialized
		return d
	case needsAdoption(o.Lock, d.Owner):
		d.Action = ActionAdopt
		return d
	}
	return d
}

func needsAdoption(l *Lock, owner OwnerState) bool {
	return owner != OwnerOK || l.ClusterAbsentSince != nil || l.StaleMark
}

func verdict(o Observation) Verdict {
	l := o.Lock
	switch {
	case l.Problem != nil && isNotALock(l.Problem):
		return VerdictForeign
	case l.Problem != nil:
		return VerdictCorrupt
	case o.Cluster == nil:
		return VerdictOrphan
	case o.Cluster.Initialized:
		return VerdictHeldAfterInit
	case o.Holder == nil:
		return VerdictStaleHolder
	case ownerState(l, o.Cluster) != OwnerOK:
		return VerdictUnowned
	}
	return VerdictHealthy
}

// ownerState compares a lock's Cluster ownerReferences with the Cluster.
func ownerState(l *Lock, c *Cluster) OwnerState {
	var right, stale, wrong int
	for _, ref := range l.OwnerReferences {
		if ref.Kind != capi.ClusterKind || !capi.IsClusterAPIVersion(ref.APIVersion) {
			continue
		}
		switch {
		case c != nil && ref.Name == c.Name && ref.UID == c.UID:
			right++
		case ref.Name == trimSuffix(l.Name):
			stale++
		default:
			wrong++
		}
	}
	switch {
	case wrong > 0:
		return OwnerWrongCluster
	case stale > 0:
		return OwnerStaleUID
	case right == 1:
		return OwnerOK
	case right > 1:
		return OwnerStaleUID
	}
	return OwnerMissing
}

func trimSuffix(lockName string) string {
	if len(lockName) > len(LockSuffix) {
		return lockName[:len(lockName)-len(LockSuffix)]
	}
	return lockName
}

func isNotALock(err error) bool { return errors.Is(err, ErrNotALock) }

// String describes a decision in one line, for logs and the CLI.
func (d Decision) String() string {
	s := fmt.Sprintf("verdict=%s action=%s", d.Verdict, d.Action)
	if d.Holder != "" {
		s += " holder=" + d.Holder
	}
	if d.Err != nil {
		s += " error=" + d.Err.Error()
	}
	return s
}
