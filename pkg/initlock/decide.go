package initlock

import (
	"errors"
	"fmt"
	"sort"
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
	// VerdictLost: there is no lock, but a Machine of the uninitialised
	// cluster holds a grant record: the lock was deleted while held.
	VerdictLost Verdict = "lost"
	// VerdictHealthy: held by an existing Machine, owned by its Cluster.
	VerdictHealthy Verdict = "healthy"
	// VerdictFree: there is no lock and no grant.
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
	// ActionRecreate: create the lost lock for the Machine that holds the
	// grant, not for the caller.
	ActionRecreate Action = "recreate"
	// ActionAdopt: point the Cluster ownerReference at the current UID,
	// refresh the holder's UID and drop a cluster-absent mark, in one
	// update.
	ActionAdopt Action = "adopt"
	// ActionTakeOver: the holder no longer exists; rewrite the lock for the
	// caller, conditional on the resourceVersion read.
	ActionTakeOver Action = "take-over"
	// ActionYield: the caller just wrote the lock but another Machine holds
	// a grant; hand the lock to it and withdraw the caller's grant.
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
	// Cluster is the Cluster, or nil when it does not exist.
	Cluster *Cluster
	// Holder is the Machine the lock names, or nil when it does not exist.
	// Only meaningful when Lock holds a valid record.
	Holder *Machine
	// Grants are the existing Machines of the cluster that carry a grant
	// record for it, when they were listed; nil when they were not.
	Grants []Machine
	// Caller is the Machine asking for the lock, or nil when the decision is
	// made for the manager or the CLI. Its Grant is the grant it held when
	// the Lock call began, read live, or nil when it held none: a grant
	// recorded during the call is only in Grants.
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
	uninitialised := o.Cluster != nil && !o.Cluster.Initialized
	if uninitialised && len(o.Grants) > 0 {
		d.Verdict, d.Holder = VerdictLost, earliestGrant(o.Grants).Name
	}
	if o.Caller == nil {
		return d
	}
	if o.Cluster != nil && o.Cluster.Paused {
		d.Err = ErrClusterPaused
		return d
	}
	if w, ok := yieldTo(o); ok {
		d.Action, d.Holder = ActionRecreate, w
		return d
	}
	d.Action, d.Holder, d.Acquired = ActionCreate, o.Caller.Name, true
	return d
}

// decideCaller decides for a Machine calling Lock.
func decideCaller(o Observation, d Decision) Decision {
	caller := o.Caller
	if d.Holder != caller.Name && o.Holder != nil {
		d.Action = ActionNone // held by another existing Machine
		return d
	}
	if w, ok := yieldTo(o); ok {
		d.Action, d.Holder = ActionYield, w
		return d
	}
	d.Acquired = true
	if d.Holder != caller.Name {
		d.Action, d.Holder = ActionTakeOver, caller.Name
		return d
	}
	if needsAdoption(o.Lock, d.Owner) || (caller.UID != "" && o.Lock.Record.MachineUID != caller.UID) {
		d.Action = ActionAdopt
		return d
	}
	d.Action = ActionNone
	return d
}

// yieldTo tells whether the caller must give the lock to another Machine's
// grant, and to which. A grant recorded in this call gives way to any
// other. A grant the caller already held gives way only to an earlier one:
// it may be in use by a running init, and a later grant is a competitor's
// that will give way to it, or one a failed call left behind. Grants do not
// count once the control plane is initialised.
func yieldTo(o Observation) (string, bool) {
	caller := o.Caller
	if o.Cluster == nil || o.Cluster.Initialized {
		return "", false
	}
	others := otherGrants(o.Grants, caller.Name)
	if len(others) == 0 {
		return "", false
	}
	if heldGrant(o, caller) && earliestGrant(o.Grants).Name == caller.Name {
		return "", false
	}
	return earliestGrant(others).Name, true
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

func otherGrants(grants []Machine, caller string) []Machine {
	var out []Machine
	for _, g := range grants {
		if g.Name != caller {
			out = append(out, g)
		}
	}
	return out
}

// heldGrant tells whether the caller came into the call holding a grant for
// the cluster that the live list still shows.
func heldGrant(o Observation, caller *Machine) bool {
	return caller.Grant.For(o.Cluster.Name) && hasMachine(o.Grants, caller.Name)
}

// earliestGrant picks the grant that wins when several Machines carry one:
// the earliest recorded, then a grant of unknown time, then by name.
func earliestGrant(grants []Machine) Machine {
	gs := append([]Machine(nil), grants...)
	sort.SliceStable(gs, func(i, j int) bool {
		ti, tj := grantTime(gs[i]), grantTime(gs[j])
		if !ti.Equal(tj) {
			return ti.Before(tj)
		}
		return gs[i].Name < gs[j].Name
	})
	return gs[0]
}

func grantTime(m Machine) time.Time {
	if m.Grant == nil || m.Grant.AcquiredAt == nil {
		return time.Time{} // unknown: treated as the oldest, the safe side
	}
	return *m.Grant.AcquiredAt
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
