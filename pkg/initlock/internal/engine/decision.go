package engine

import (
	"fmt"
	"time"

	"k8s.io/apimachinery/pkg/types"
)

// Verdict is the health of a cluster's lock.
type Verdict string

// Verdicts, from the worst down. A lock has the first that applies.
const (
	// VerdictForeign: a ConfigMap has the lock's name but is not a lock.
	VerdictForeign Verdict = "foreign"
	// VerdictCorrupt: the lock's record cannot be read, or the Cluster's
	// grant register holds something that is not a grant.
	VerdictCorrupt Verdict = "corrupt"
	// VerdictOrphan: the lock's Cluster does not exist.
	VerdictOrphan Verdict = "orphan"
	// VerdictHeldAfterInit: the control plane is initialised, yet the lock
	// is still held.
	VerdictHeldAfterInit Verdict = "held-after-init"
	// VerdictConflict: the lock and the Cluster's grant register name two
	// different existing Machines. Neither is granted the lock, and no
	// other Machine is, until one of them is gone, the control plane is
	// initialised or an operator releases the lock.
	VerdictConflict Verdict = "conflict"
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
	VerdictForeign, VerdictCorrupt, VerdictOrphan, VerdictHeldAfterInit, VerdictConflict,
	VerdictStaleHolder, VerdictUnowned, VerdictLost, VerdictHealthy, VerdictFree,
}

// Action is what should be done to the lock ConfigMap. Every write is made
// with optimistic concurrency (resourceVersion) or delete preconditions
// (UID and resourceVersion); a create fails if the lock exists.
type Action string

// Actions.
const (
	// ActionNone: nothing to write.
	ActionNone Action = "none"
	// ActionCreate: create the lock for the caller.
	ActionCreate Action = "create"
	// ActionRecreate: create the lost lock for the Machine the grant
	// register names, not for the caller.
	ActionRecreate Action = "recreate"
	// ActionAdopt: point the Cluster ownerReference at the current UID and
	// drop a cluster-absent mark, in one patch; the record is kept.
	ActionAdopt Action = "adopt"
	// ActionTakeOver: write the lock for the caller, replacing the record
	// read (the caller's own earlier one, or a gone holder's).
	ActionTakeOver Action = "take-over"
	// ActionYield: write the lock for the Machine the grant register names.
	ActionYield Action = "yield"
	// ActionRelease: delete the lock: the release mark (ReleaseAnnotation),
	// then the delete.
	ActionRelease Action = "release"
	// ActionMarkOrphan: record on the lock since when its Cluster has been
	// missing.
	ActionMarkOrphan Action = "mark-orphan"
	// ActionCollect: delete an orphan lock, as ActionRelease does.
	ActionCollect Action = "collect"
	// ActionUnmark: take off the lock the marks the lock guard lets a
	// delete through with (its release mark, clusterctl move's
	// delete-for-move), left there by a release or a move that stopped
	// half-way, from a lock the keeper does not release now.
	ActionUnmark Action = "unmark"
)

// RegisterOp is what should be done to the Cluster's grant register, in
// the same round as the Action. Every write is a compare-and-swap against
// the value observed, and tests that the Cluster is not paused.
type RegisterOp string

// Register operations.
const (
	// RegisterNone: leave the register as it is.
	RegisterNone RegisterOp = ""
	// RegisterClaim: record a new grant, with a fresh token, for the
	// caller; the Action writes the lock with the same token.
	RegisterClaim RegisterOp = "claim"
	// RegisterRetire: record a new grant, with a fresh token, for the
	// Machine the register names: the first step of a release, after which
	// no earlier acquisition's token is relied on.
	RegisterRetire RegisterOp = "retire"
	// RegisterWithdraw: record a release; the register then names no one.
	RegisterWithdraw RegisterOp = "withdraw"
)

// Intent is what a decision is for.
type Intent string

// Intents.
const (
	// IntentKeep: the manager or kubectl initlock repair keeps the lock
	// owned, releases it after init and collects it when orphaned.
	IntentKeep Intent = "keep"
	// IntentLock: Observation.Caller asks for the lock.
	IntentLock Intent = "lock"
	// IntentUnlock: Observation.Caller releases the lock it holds; with no
	// Caller, whoever holds it.
	IntentUnlock Intent = "unlock"
	// IntentRelease: an operator releases the lock, whoever holds it
	// (kubectl initlock release).
	IntentRelease Intent = "release"
)

// Release reasons, for events and metrics.
const (
	ReasonInitialized     = "initialized"
	ReasonClusterDeleting = "cluster-deleting"
	ReasonOrphan          = "orphan"
	ReasonUnlock          = "unlock"
	// ReasonHolderGone: the lock of an uninitialised Cluster names a
	// Machine that is gone (read live): a keeper releases it, so that the
	// next Machine may take it, as a bootstrap provider's own release of a
	// gone holder's lock would (which the admission policy refuses).
	ReasonHolderGone = "holder-gone"
)

// Wait says why a lock that is not healthy is left as it is for now.
type Wait string

// Waits.
const (
	// WaitNone: nothing is waited for.
	WaitNone Wait = ""
	// WaitPaused: the Cluster is paused; nothing is decided until it is
	// unpaused.
	WaitPaused Wait = "paused"
	// WaitSettle: the lock was just found without its Cluster; the absence
	// is recorded once it has lasted the manager's settle time.
	WaitSettle Wait = "settle"
	// WaitGrace: the orphan lock is collected at Decision.WaitUntil.
	WaitGrace Wait = "grace"
	// WaitHolder: the Cluster is missing past the grace period, but the
	// holder Machine exists (a restore may still be bringing the Cluster
	// back).
	WaitHolder Wait = "holder-exists"
	// WaitHolderRestore: the holder Machine is gone, but the lock or its
	// Cluster was created less than the grace period ago: a restore that
	// brings a Cluster back before its Machines may still bring the
	// holder back.
	// The lock is released at Decision.WaitUntil if the holder is still
	// gone then.
	WaitHolderRestore Wait = "holder-restore"
	// WaitLockRecreated: the lock was lost while granted; the bootstrap
	// provider recreates it for the granted Machine at its next Lock.
	WaitLockRecreated Wait = "lock-recreated"
	// WaitTakeOver: the holder is gone; the next Machine to ask takes the
	// lock over.
	WaitTakeOver Wait = "take-over"
	// WaitPerson: only a person can resolve it (a corrupt lock or register,
	// a ConfigMap in the lock's way, two Machines in conflict).
	WaitPerson Wait = "person"
	// WaitDeleting: the lock is being deleted, held back by a finalizer of
	// another controller's: it counts as held until it is gone.
	WaitDeleting Wait = "deleting"
)

// Observation is everything Decide looks at. Read gathers it, from a cache
// or from the API server.
type Observation struct {
	// Intent is what the decision is for; empty means IntentKeep.
	Intent Intent
	// ClusterName is the cluster the lock belongs to.
	ClusterName string
	// APIVersion is the Cluster API group/version the Cluster and the
	// Machines were read in (Query.APIVersion); Confirm reads in it too.
	APIVersion string
	// Lock is the ConfigMap with the lock's name, or nil when there is none.
	Lock *Lock
	// Cluster is the Cluster, or nil when it does not exist. Its Grant is
	// the grant register.
	Cluster *Cluster
	// Holder is the Machine of the name the lock's record gives, or nil
	// when none exists. Only meaningful when Lock holds a valid record.
	Holder *Machine
	// Granted is the Machine of the name the grant register gives, or nil
	// when none exists, the register names none, or the control plane is
	// initialised.
	Granted *Machine
	// Caller is the Machine asking (IntentLock) or releasing (IntentUnlock),
	// as the caller's object identifies it; nil for the others.
	Caller *Machine
	// CallerCluster is the UID of the Cluster object the caller passed
	// (IntentUnlock), when it has one: a release made with an object of
	// another incarnation of the Cluster than the live one (deleted and
	// created again, restored, moved) is refused (initlock.ErrStaleCluster).
	CallerCluster types.UID
	// Force tells that an operator's release (IntentRelease) goes ahead
	// although it needs Force (Decision.NeedsForce). Without it, Decide
	// refuses such a release: it writes nothing, and Err wraps
	// initlock.ErrNotHolder.
	Force bool
	// CallerLive is the Machine of the caller's name as read live, nil when
	// none exists (IntentLock).
	CallerLive *Machine
	// Tokens are the tokens this call wrote, or tried to write, into the
	// register or the lock (IntentLock, IntentUnlock).
	Tokens []string
	// Uncertain tells that a write of the lock this call made may have been
	// applied although it failed, or may still be applied (IntentLock): a
	// grant this call recorded is then kept, never withdrawn.
	Uncertain bool
	// ClaimUncertain tells that a claim of the register this call made may
	// have been applied unseen, or may still be applied (its answer was
	// lost, or it timed out).
	ClaimUncertain bool
	// LostWrites are the writes of the lock this call made whose answers
	// were lost (IntentLock): the decision each carried out, by the token
	// of the record it wrote.
	LostWrites map[string]Decision
	// AbsentSince is since when the keeper has seen this lock (by its UID)
	// without its Cluster, by its own watch; nil when it has not. The
	// manager keeps it in memory, so a restart starts it again: that only
	// delays the orphan's mark (Policy.OrphanSettle).
	AbsentSince *time.Time
	// OutOfScope tells that the lock's Cluster is outside the keeper's
	// watch filter (IntentKeep): the keeper does not adopt it, but still
	// releases and collects it when that is safe. A filter decides what a
	// keeper takes care of, never what it lets go.
	OutOfScope bool
	// Pinned tells that PinnedLock and PinnedRegister are what the first
	// read of this release found (IntentUnlock, IntentRelease): a release
	// of whoever holds the lock releases, in its later rounds, only that
	// lock and that grant (or the grant it wrote since).
	Pinned bool
	// PinnedLock is the lock as the release's first read found it, nil
	// when there was none; PinnedRegister the grant register's value then
	// (Grant.Raw).
	PinnedLock     *Lock
	PinnedRegister string
	// FirstRead tells that this is the call's first live read of the lock
	// (IntentLock): Decide then finds whether the lock named the caller
	// before the call wrote it (Decision.HeldBefore).
	FirstRead bool
	// HeldBefore is the HeldBefore of the decision on the call's first
	// read, carried on to the call's later rounds.
	HeldBefore bool
}

// Policy is what the manager and the CLI are configured to do.
type Policy struct {
	// ReleaseAfterInit releases a lock once the control plane is
	// initialised.
	ReleaseAfterInit bool
	// OrphanGrace is how long a Cluster must have been missing before its
	// lock is collected.
	OrphanGrace time.Duration
	// OrphanSettle is how long a keeper must have seen a lock without its
	// Cluster (Observation.AbsentSince) before it records the absence on
	// the lock (ActionMarkOrphan): a restore that brings the Cluster back
	// within it costs no write. Zero records it at once. The mark records
	// the first sight, so the settle time does not lengthen the grace
	// period; a settle time longer than OrphanGrace counts as OrphanGrace.
	OrphanSettle time.Duration
}

// DefaultPolicy is the manager's default policy, less OrphanSettle, which
// the manager sets (--orphan-settle): a one-shot repair has no watch to
// settle.
var DefaultPolicy = Policy{ReleaseAfterInit: true, OrphanGrace: 10 * time.Minute}

// Decision is the verdict on a lock and what to do about it.
type Decision struct {
	Verdict Verdict
	// Owner is the ownerReference state; empty when there is no lock.
	Owner OwnerState
	// Action is the write to the lock ConfigMap.
	Action Action
	// Register is the write to the grant register, made in parallel with
	// Action.
	Register RegisterOp
	// Holder is the Machine that holds the lock after the writes.
	Holder string
	// Acquired tells the caller that it holds the lock once the writes
	// succeed (IntentLock).
	Acquired bool
	// Recreated tells that the lock was lost while granted and the writes
	// give it back to its granted holder (IntentLock): the caller, or the
	// Machine the register names when the caller is refused.
	Recreated bool
	// CompletesClaim tells that the lock is written with the token of this
	// call's standing claim, the register's (IntentLock); otherwise a claim
	// (Register) brings a fresh token, and a write with neither carries
	// none.
	CompletesClaim bool
	// ReadCallerFirst tells that the claim is made only once a live read
	// of the caller's Machine, after the Cluster was read, shows it is the
	// caller's object: the claim replaces a grant naming the caller by
	// name only. Otherwise the claim and the read run together.
	ReadCallerFirst bool
	// HeldBefore tells that the lock named the caller when this call first
	// read it, before the call wrote it (an upstream lock of the caller's,
	// or its own from an earlier call): a lock this call wrote since is
	// then still the caller's, and is never handed to another Machine
	// (IntentLock). The call carries it on to its later rounds
	// (Observation.HeldBefore).
	HeldBefore bool
	// Landed is the action of a write of the lock this call made whose
	// answer was lost, when the lock as read shows it applied: the record
	// names the caller with that write's token (IntentLock). The caller
	// holds the lock with nothing more to write, and Lock reports Landed as
	// the change it made (and Recreated as that write's decision said).
	// Empty otherwise.
	Landed Action
	// Unmark tells that an orphan's mark (ActionMarkOrphan) takes off, in
	// the same write, the marks a delete passes with (the release mark,
	// clusterctl move's delete-for-move), as ActionUnmark would: the lock
	// carries them and no release is under way. ActionUnmark, ActionAdopt
	// and the lock's rewrites always take them off.
	Unmark bool
	// Reason is a fixed word for releases and collections (Reason*).
	Reason string
	// RequeueAfter is when to look again, for waits with a deadline.
	RequeueAfter time.Duration
	// Wait says why nothing is done for now, and WaitUntil until when
	// (zero when no time is known).
	Wait      Wait
	WaitUntil time.Time
	// NeedsForce tells that an operator's release (IntentRelease) may let
	// a second Machine run init: the holder exists and the control plane
	// is not initialised. ForceReason says which Machine. Without
	// Observation.Force, such a release that would write is refused.
	NeedsForce  bool
	ForceReason string
	// Err is set when the lock cannot be used or must not be touched: it
	// wraps initlock.ErrNotALock, initlock.ErrCorruptLock, initlock.ErrClusterPaused, initlock.ErrClusterGone,
	// initlock.ErrStaleMachine or initlock.ErrNotHolder.
	Err error
}

// Writes tells whether the decision writes anything.
func (d Decision) Writes() bool { return d.Action != ActionNone || d.Register != RegisterNone }

// String describes a decision in one line, for logs and the CLI.
func (d Decision) String() string {
	s := fmt.Sprintf("verdict=%s action=%s", d.Verdict, d.Action)
	if d.Register != RegisterNone {
		s += " register=" + string(d.Register)
	}
	if d.Holder != "" {
		s += " holder=" + d.Holder
	}
	if d.Err != nil {
		s += " error=" + d.Err.Error()
	}
	return s
}
