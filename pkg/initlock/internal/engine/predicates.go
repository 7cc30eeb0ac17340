package engine

import (
	"errors"
	"fmt"
	"slices"

	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/initlock/initlock/pkg/initlock/capi"
	"github.com/initlock/initlock/pkg/initlock/internal/report"
)

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

func verdict(o Observation) Verdict {
	g := grantOf(o)
	l := o.Lock
	if l == nil {
		switch g {
		case grantOther, grantCaller:
			return VerdictLost
		case grantDamaged:
			return VerdictCorrupt
		}
		return VerdictFree
	}
	switch {
	case l.Problem != nil && isNotALock(l.Problem):
		return VerdictForeign
	case l.Problem != nil || g == grantDamaged:
		return VerdictCorrupt
	case o.Cluster == nil:
		return VerdictOrphan
	case o.Cluster.Initialized:
		return VerdictHeldAfterInit
	}
	lk := lockOf(o)
	if lk == lockGone || lk == lockMissing {
		return VerdictStaleHolder
	}
	if conflict(o, g, lk) {
		return VerdictConflict
	}
	if ownerState(l, o.Cluster) != OwnerOK {
		return VerdictUnowned
	}
	return VerdictHealthy
}

// grantKind is what the Cluster's grant register says to a decision.
type grantKind int

const (
	// grantNone: no grant counts: the register is empty or released,
	// names a Machine that is gone (or the caller under another UID), or
	// the control plane is initialised.
	grantNone grantKind = iota
	// grantCaller: the register names the caller (IntentLock).
	grantCaller
	// grantOther: the register names another Machine, which exists (under
	// any UID: Ref.Claims).
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
	case g.Claims(o.Granted) && !sameName(o.CallerLive, o.Granted):
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
	// lockOther: the record names another Machine, which exists (under any
	// UID: Ref.Claims).
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
	case o.Lock.Record.Claims(o.Holder) && !sameName(o.CallerLive, o.Holder):
		return lockOther
	}
	return lockGone
}

// sameName tells whether the caller is Machine m by name: a record that
// names m by name but not by the caller's UID is no other Machine's to the
// caller (Ref.Claims), which takes it over as a gone holder's.
func sameName(caller, m *Machine) bool {
	return caller != nil && m != nil && caller.Name == m.Name
}

// conflict tells whether the lock and the grant register name two
// different existing Machines.
func conflict(o Observation, g grantKind, lk lockKind) bool {
	var granted, held *Machine
	switch g {
	case grantCaller:
		granted = o.CallerLive
	case grantOther:
		granted = o.Granted
	default:
		return false
	}
	switch lk {
	case lockCaller:
		held = o.CallerLive
	case lockOther:
		held = o.Holder
	default:
		return false
	}
	return granted.Name != held.Name
}

// ownerState compares a lock's Cluster ownerReferences with the Cluster.
func ownerState(l *Lock, c *Cluster) OwnerState {
	var right, stale, wrong int
	for _, ref := range l.OwnerReferences {
		if !isCluster(ref.APIVersion, ref.Kind) {
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

// isCluster tells whether apiVersion and kind name a Cluster API Cluster,
// in any version.
func isCluster(apiVersion, kind string) bool {
	return schema.FromAPIVersionAndKind(apiVersion, kind).GroupKind() == capi.ClusterGVK("").GroupKind()
}

// grantThatCounts is cl's grant register while it counts: nil when there
// is no Cluster, when its control plane is initialised (no grant counts
// after init) and when the register is empty or records a release.
func grantThatCounts(cl *Cluster) *Grant {
	if cl == nil || cl.Initialized || cl.Grant == nil || cl.Grant.Released() {
		return nil
	}
	return cl.Grant
}

func needsAdoption(l *Lock, owner OwnerState) bool {
	return owner != OwnerOK || l.ClusterAbsentSince != nil || l.StaleMark
}

// errDamagedGrant is the decision error for a damaged grant register.
var errDamagedGrant = fmt.Errorf("%w: the Cluster's grant register (annotation %s) is not a grant record", report.ErrCorruptLock, GrantAnnotation)

// isDamagedGrant tells whether err is about a damaged grant register.
func isDamagedGrant(err error) bool { return errors.Is(err, errDamagedGrant) }

func isNotALock(err error) bool { return errors.Is(err, report.ErrNotALock) }

// mine tells whether token was written by this call.
func (o Observation) mine(token string) bool { return token != "" && slices.Contains(o.Tokens, token) }

// sameMachine tells whether live, the Machine of a caller's name as read
// live, is the object the caller passed: it exists and, when the object
// passed has a UID, has that UID. Every rule that rests on a caller's
// identity checks it so: Lock's decision and its claim, Unlock's decision.
func sameMachine(passed, live *Machine) bool {
	return live != nil && (passed == nil || passed.UID == "" || live.UID == passed.UID)
}
