package engine_test

import (
	"errors"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/initlock/initlock/pkg/initlock/internal/engine"
	"github.com/initlock/initlock/pkg/initlock/internal/report"
)

var t0 = time.Date(2026, 12, 2, 12, 0, 0, 0, time.UTC)

// lockOf builds an observed lock of cluster c1 (UID c1-uid) written by
// initlock for holder with token, owned by owners. An empty token is a lock
// written without one (handed over, or by an older initlock).
func lockOf(holder, token string, owners ...metav1.OwnerReference) *engine.Lock {
	return &engine.Lock{
		Namespace: "ns", Name: "c1-lock", UID: "lock-uid", ResourceVersion: "7",
		Record: engine.Record{Ref: engine.Ref{MachineName: holder, MachineUID: types.UID(holder + "-uid"), ClusterUID: "c1-uid"},
			Token: token, AcquiredAt: &t0},
		OwnerReferences: owners,
	}
}

// upstreamLock builds a lock as the upstream providers write it: the
// holder's name only.
func upstreamLock(holder string, owners ...metav1.OwnerReference) *engine.Lock {
	return &engine.Lock{Namespace: "ns", Name: "c1-lock", UID: "lock-uid", ResourceVersion: "7",
		Record: engine.Record{Ref: engine.Ref{MachineName: holder}}, OwnerReferences: owners}
}

// created is l created at t.
func created(l *engine.Lock, t time.Time) *engine.Lock {
	l.Created = t
	return l
}

// beingDeleted is l being deleted (another controller's finalizer holds
// it), releasable l carrying its release mark.
func beingDeleted(l *engine.Lock) *engine.Lock { l.Deleting = true; return l }
func releasable(l *engine.Lock) *engine.Lock   { l.Releasable = true; return l }

// releaseStarted is l whose release mark was written at t.
func releaseStarted(l *engine.Lock, t time.Time) *engine.Lock { l.ReleaseStarted = &t; return l }

// moveMarked is l carrying clusterctl move's delete-for-move annotation.
func moveMarked(l *engine.Lock) *engine.Lock { l.MoveMark = true; return l }

// handedOver is the lock a refused caller wrote for holder, the Machine the
// register named: no token.
func handedOver(holder string) *engine.Lock {
	l := lockOf(holder, "", owned)
	l.Record.HandedOverBy = "m3"
	return l
}

// restoredLock is lockOf written before a restore: the Cluster and the
// holder had other UIDs.
func restoredLock(holder, token string) *engine.Lock {
	l := lockOf(holder, token)
	l.Record.MachineUID, l.Record.ClusterUID = "old-"+l.Record.MachineUID, "old-c1-uid"
	return l
}

func ownerRef(name string, uid types.UID) metav1.OwnerReference {
	return metav1.OwnerReference{APIVersion: "cluster.x-k8s.io/v1beta2", Kind: "Cluster", Name: name, UID: uid}
}

var owned = ownerRef("c1", "c1-uid")

func cluster(mods ...func(*engine.Cluster)) *engine.Cluster {
	c := &engine.Cluster{Namespace: "ns", Name: "c1", UID: "c1-uid", APIVersion: "cluster.x-k8s.io/v1beta2"}
	for _, m := range mods {
		m(c)
	}
	return c
}

// createdAt sets a Cluster's creationTimestamp.
func createdAt(t time.Time) func(*engine.Cluster) {
	return func(c *engine.Cluster) { c.Created = t }
}

func machine(name string) *engine.Machine {
	return &engine.Machine{Namespace: "ns", Name: name, UID: types.UID(name + "-uid"), APIVersion: "cluster.x-k8s.io/v1beta2"}
}

// recreated is machine name created again: same name, another UID.
func recreated(name string) *engine.Machine {
	m := machine(name)
	m.UID = "new-" + m.UID
	return m
}

func register(value string) func(*engine.Cluster) {
	// Read once: the property tests build millions of Clusters from it.
	g := engine.GrantFrom(map[string]string{engine.GrantAnnotation: value})
	return func(c *engine.Cluster) {
		if g != nil {
			copied := *g
			c.Grant = &copied
		}
	}
}

// grantTo records a grant to name (UID name-uid, Cluster UID c1-uid) with
// token.
func grantTo(name, token string) func(*engine.Cluster) {
	return register(`{"machineName":"` + name + `","machineUID":"` + name + `-uid","clusterUID":"c1-uid","token":"` + token + `"}`)
}

// restoredGrant is grantTo recorded before a restore.
func restoredGrant(name, token string) func(*engine.Cluster) {
	return register(`{"machineName":"` + name + `","machineUID":"old-` + name + `-uid","clusterUID":"old-c1-uid","token":"` + token + `"}`)
}

var (
	released     = register(`{"machineName":"","token":"t0","releasedAt":"2026-12-02T11:00:00Z"}`)
	damagedGrant = register("not json")
	paused       = func(c *engine.Cluster) { c.Paused = true }
	initialized  = func(c *engine.Cluster) { c.Initialized = true }
	deleting     = func(c *engine.Cluster) { c.Deleting = true }
)

func withMark(l *engine.Lock, since time.Time) *engine.Lock {
	l.ClusterAbsentSince = &since
	return l
}

// lockCall is an Observation of m1 calling Lock.
func lockCall(o engine.Observation) engine.Observation {
	o.Intent = engine.IntentLock
	if o.Caller == nil {
		o.Caller = machine("m1")
	}
	if o.CallerLive == nil {
		o.CallerLive = o.Caller
	}
	return o
}

// unlockCall is an Observation of m1 calling Unlock (nil machine: any
// holder), the caller's object live unless CallerLive says otherwise.
func unlockCall(caller *engine.Machine, o engine.Observation) engine.Observation {
	o.Intent, o.Caller = engine.IntentUnlock, caller
	if o.CallerLive == nil {
		o.CallerLive = caller
	}
	return o
}

// callerGone is o with no live Machine of the caller's name.
func callerGone(o engine.Observation) engine.Observation {
	o.CallerLive = nil
	return o
}

// restoredFrom is an object of machine name read before a restore: the
// UID it had then.
func restoredFrom(name string) *engine.Machine {
	m := machine(name)
	m.UID = "old-" + m.UID
	return m
}

// pinned is o on a later round of a release whose first read found lock
// first and the register value register (Observation.Pinned).
func pinned(o engine.Observation, first *engine.Lock, register string) engine.Observation {
	o.Pinned, o.PinnedLock, o.PinnedRegister = true, first, register
	return o
}

// otherUID is l created again: another ConfigMap of the lock's name.
func otherUID(l *engine.Lock) *engine.Lock {
	l.UID = "lock-uid-2"
	return l
}

// grantOfM1 is the register's value grantTo("m1", "t1") records.
const grantOfM1 = `{"machineName":"m1","machineUID":"m1-uid","clusterUID":"c1-uid","token":"t1"}`

func operator(o engine.Observation) engine.Observation {
	o.Intent = engine.IntentRelease
	return o
}

// forced is an operator's release made with Force.
func forced(o engine.Observation) engine.Observation {
	o = operator(o)
	o.Force = true
	return o
}

type want struct {
	verdict  engine.Verdict
	action   engine.Action
	register engine.RegisterOp
	holder   string
	acquired bool
	// recreated, completes and readFirst are the decision's Recreated,
	// CompletesClaim and ReadCallerFirst.
	recreated, completes, readFirst bool
	// landed is the decision's Landed, heldBefore its HeldBefore.
	landed     engine.Action
	heldBefore bool
	// unmark is the decision's Unmark.
	unmark  bool
	err     error
	wait    engine.Wait
	force   bool
	requeue time.Duration
	// reason, when set, is the release's Reason.
	reason string
}

// decideRows is the decision table: one row per rule. Every row is also
// checked against the properties of TestDecideProperties.
var decideRows = []struct {
	name   string
	obs    engine.Observation
	policy *engine.Policy
	want   want
}{
	// Lock: the free path and its variants.
	{"free: claim the register and create the lock",
		lockCall(engine.Observation{Cluster: cluster()}),
		nil, want{verdict: engine.VerdictFree, action: engine.ActionCreate, register: engine.RegisterClaim, holder: "m1", acquired: true}},
	{"free after a release: the released register is empty",
		lockCall(engine.Observation{Cluster: cluster(released)}),
		nil, want{verdict: engine.VerdictFree, action: engine.ActionCreate, register: engine.RegisterClaim, holder: "m1", acquired: true}},
	{"paused: nothing, even when free",
		lockCall(engine.Observation{Cluster: cluster(paused)}),
		nil, want{verdict: engine.VerdictFree, action: engine.ActionNone, err: report.ErrClusterPaused, wait: engine.WaitPaused}},
	{"paused live after this call wrote the lock, its grant gone: nothing (no write races the pause test)",
		lockCall(engine.Observation{Lock: lockOf("m1", "mine", owned), Cluster: cluster(paused), Tokens: []string{"mine"}}),
		nil, want{verdict: engine.VerdictHealthy, action: engine.ActionNone, holder: "m1", err: report.ErrClusterPaused, wait: engine.WaitPaused}},
	{"paused live, the lock this call created stands with its grant: nothing",
		lockCall(engine.Observation{Lock: lockOf("m1", "mine", owned), Cluster: cluster(paused, grantTo("m1", "mine")), Tokens: []string{"mine"}}),
		nil, want{verdict: engine.VerdictHealthy, action: engine.ActionNone, holder: "m1", err: report.ErrClusterPaused, wait: engine.WaitPaused}},
	{"paused live, a lock of an earlier call: nothing",
		lockCall(engine.Observation{Lock: lockOf("m1", "t1", owned), Cluster: cluster(paused), Tokens: []string{"mine"}}),
		nil, want{verdict: engine.VerdictHealthy, action: engine.ActionNone, holder: "m1", err: report.ErrClusterPaused, wait: engine.WaitPaused}},
	{"cluster gone",
		lockCall(engine.Observation{}),
		nil, want{verdict: engine.VerdictFree, action: engine.ActionNone, err: report.ErrClusterGone}},
	{"the caller's object is a deleted Machine's (the live one has another UID): refused",
		lockCall(engine.Observation{Cluster: cluster(), CallerLive: recreated("m1")}),
		nil, want{verdict: engine.VerdictFree, action: engine.ActionNone, err: report.ErrStaleMachine}},
	{"the caller's Machine is gone: refused",
		engine.Observation{Intent: engine.IntentLock, Caller: machine("m1"), Cluster: cluster()},
		nil, want{verdict: engine.VerdictFree, action: engine.ActionNone, err: report.ErrStaleMachine}},
	{"damaged register: refused, even with no lock",
		lockCall(engine.Observation{Cluster: cluster(damagedGrant)}),
		nil, want{verdict: engine.VerdictCorrupt, action: engine.ActionNone, err: report.ErrCorruptLock, wait: engine.WaitPerson}},

	// Lock: the register protects another Machine.
	{"lost lock: recreated for the granted Machine, caller refused",
		lockCall(engine.Observation{Cluster: cluster(grantTo("m2", "t2")), Granted: machine("m2")}),
		nil, want{verdict: engine.VerdictLost, action: engine.ActionRecreate, holder: "m2", recreated: true}},
	{"after a restore (new Cluster UID) the grant names its Machine by name",
		lockCall(engine.Observation{Cluster: cluster(restoredGrant("m2", "t2")), Granted: machine("m2")}),
		nil, want{verdict: engine.VerdictLost, action: engine.ActionRecreate, holder: "m2", recreated: true}},
	{"held by the granted Machine through both: refused",
		lockCall(engine.Observation{Lock: lockOf("m2", "t2", owned), Cluster: cluster(grantTo("m2", "t2")), Holder: machine("m2"), Granted: machine("m2")}),
		nil, want{verdict: engine.VerdictHealthy, action: engine.ActionNone, holder: "m2"}},
	{"a lock this call wrote while another Machine is granted: handed to it",
		lockCall(engine.Observation{Lock: lockOf("m1", "mine", owned), Cluster: cluster(grantTo("m2", "t2")), Granted: machine("m2"), Tokens: []string{"mine"}}),
		nil, want{verdict: engine.VerdictConflict, action: engine.ActionYield, holder: "m2", recreated: true}},
	{"a lock naming a gone Machine while another is granted: handed to the granted one",
		lockCall(engine.Observation{Lock: lockOf("m3", "t3", owned), Cluster: cluster(grantTo("m2", "t2")), Granted: machine("m2")}),
		nil, want{verdict: engine.VerdictStaleHolder, action: engine.ActionYield, holder: "m2"}},
	{"the caller's lock from an earlier grant while the register names another: a conflict, nothing written",
		lockCall(engine.Observation{Lock: lockOf("m1", "t1", owned), Cluster: cluster(grantTo("m2", "t2")), Granted: machine("m2")}),
		nil, want{verdict: engine.VerdictConflict, action: engine.ActionNone, holder: "m2"}},
	{"the lock names a third existing Machine while the register names another: a conflict, nothing written",
		lockCall(engine.Observation{Lock: lockOf("m3", "t3", owned), Cluster: cluster(grantTo("m2", "t2")), Holder: machine("m3"), Granted: machine("m2")}),
		nil, want{verdict: engine.VerdictConflict, action: engine.ActionNone, holder: "m2"}},

	// Lock: the lock protects another Machine.
	{"upstream lock of an existing Machine, register empty: refused",
		lockCall(engine.Observation{Lock: upstreamLock("m2", owned), Cluster: cluster(), Holder: machine("m2")}),
		nil, want{verdict: engine.VerdictHealthy, action: engine.ActionNone, holder: "m2"}},
	{"register lost, the lock still names an existing Machine: refused (defence in depth)",
		lockCall(engine.Observation{Lock: lockOf("m2", "t2", owned), Cluster: cluster(), Holder: machine("m2")}),
		nil, want{verdict: engine.VerdictHealthy, action: engine.ActionNone, holder: "m2"}},
	{"register released, the lock still names an existing Machine: refused",
		lockCall(engine.Observation{Lock: lockOf("m2", "t2", owned), Cluster: cluster(released), Holder: machine("m2")}),
		nil, want{verdict: engine.VerdictHealthy, action: engine.ActionNone, holder: "m2"}},
	{"the register names the caller from an earlier call, the lock another Machine: refused, grant kept",
		lockCall(engine.Observation{Lock: upstreamLock("m2", owned), Cluster: cluster(grantTo("m1", "t1")), Holder: machine("m2")}),
		nil, want{verdict: engine.VerdictConflict, action: engine.ActionNone, holder: "m2"}},
	{"this call's claim stands (its answer was lost), no lock: completed with the claim's token, no new claim",
		lockCall(engine.Observation{Cluster: cluster(grantTo("m1", "mine")), Tokens: []string{"mine"}, ClaimUncertain: true}),
		nil, want{verdict: engine.VerdictFree, action: engine.ActionCreate, holder: "m1", acquired: true, completes: true}},
	{"this call's create, its answer lost, stands with its claim: held, reported as the create",
		lockCall(engine.Observation{Lock: lockOf("m1", "mine", owned), Cluster: cluster(grantTo("m1", "mine")), Tokens: []string{"mine"},
			Uncertain: true, LostWrites: map[string]engine.Decision{"mine": {Action: engine.ActionCreate}}}),
		nil, want{verdict: engine.VerdictHealthy, action: engine.ActionNone, holder: "m1", acquired: true, landed: engine.ActionCreate}},
	{"this call's take-over, its answer lost, stands with its claim: held, reported as the take-over",
		lockCall(engine.Observation{Lock: lockOf("m1", "mine", owned), Cluster: cluster(grantTo("m1", "mine")), Tokens: []string{"old", "mine"},
			Uncertain: true, LostWrites: map[string]engine.Decision{"old": {Action: engine.ActionCreate}, "mine": {Action: engine.ActionTakeOver}}}),
		nil, want{verdict: engine.VerdictHealthy, action: engine.ActionNone, holder: "m1", acquired: true, landed: engine.ActionTakeOver}},
	{"this call's create giving the caller back its lost lock, its answer lost, stands: held, reported as recreated",
		lockCall(engine.Observation{Lock: lockOf("m1", "mine", owned), Cluster: cluster(grantTo("m1", "mine")), Tokens: []string{"mine"},
			Uncertain: true, LostWrites: map[string]engine.Decision{"mine": {Action: engine.ActionCreate, Recreated: true}}}),
		nil, want{verdict: engine.VerdictHealthy, action: engine.ActionNone, holder: "m1", acquired: true, landed: engine.ActionCreate, recreated: true}},
	{"a lost write of this call that the lock does not show: nothing landed",
		lockCall(engine.Observation{Lock: lockOf("m1", "t1", owned), Cluster: cluster(grantTo("m1", "t1")), Tokens: []string{"mine"},
			Uncertain: true, LostWrites: map[string]engine.Decision{"mine": {Action: engine.ActionTakeOver}}}),
		nil, want{verdict: engine.VerdictHealthy, action: engine.ActionNone, holder: "m1", acquired: true}},
	{"this call's claim stands for a Machine restored since (by name only): claimed again, not completed",
		lockCall(engine.Observation{Cluster: cluster(restoredGrant("m1", "mine")), Tokens: []string{"mine"}}),
		nil, want{verdict: engine.VerdictLost, action: engine.ActionCreate, register: engine.RegisterClaim, holder: "m1", acquired: true, recreated: true, readFirst: true}},
	{"a stale caller whose claim landed: refused, the claim withdrawn",
		lockCall(engine.Observation{Cluster: cluster(grantTo("m1", "mine")), Tokens: []string{"mine"}, Caller: machine("m1"), CallerLive: recreated("m1")}),
		nil, want{verdict: engine.VerdictFree, action: engine.ActionNone, register: engine.RegisterWithdraw, err: report.ErrStaleMachine}},
	{"the register names the caller from an earlier call that never wrote the lock, which initlock handed to another Machine: refused, the grant withdrawn",
		lockCall(engine.Observation{Lock: handedOver("m2"), Cluster: cluster(grantTo("m1", "t1")), Holder: machine("m2")}),
		nil, want{verdict: engine.VerdictConflict, action: engine.ActionNone, register: engine.RegisterWithdraw, holder: "m2"}},
	{"a grant this call recorded, the lock another Machine's: refused, the grant withdrawn",
		lockCall(engine.Observation{Lock: upstreamLock("m2", owned), Cluster: cluster(grantTo("m1", "mine")), Holder: machine("m2"), Tokens: []string{"mine"}}),
		nil, want{verdict: engine.VerdictConflict, action: engine.ActionNone, register: engine.RegisterWithdraw, holder: "m2"}},
	{"the caller's own lock from before this call, rewritten by it, the register another's: kept, refused",
		lockCall(engine.Observation{Lock: lockOf("m1", "mine", owned), Cluster: cluster(grantTo("m2", "t2")), Granted: machine("m2"), Tokens: []string{"mine"}, HeldBefore: true}),
		nil, want{verdict: engine.VerdictConflict, action: engine.ActionNone, holder: "m2", heldBefore: true}},
	{"first read: the caller's own lock from an earlier call, the register another's: held before, kept, refused",
		lockCall(engine.Observation{Lock: lockOf("m1", "t0", owned), Cluster: cluster(grantTo("m2", "t2")), Granted: machine("m2"), Tokens: []string{"mine"}, FirstRead: true}),
		nil, want{verdict: engine.VerdictConflict, action: engine.ActionNone, holder: "m2", heldBefore: true}},
	{"first read: an upstream lock naming the caller by name, the register another's: held before, kept, refused",
		lockCall(engine.Observation{Lock: upstreamLock("m1", owned), Cluster: cluster(grantTo("m2", "t2")), Granted: machine("m2"), FirstRead: true}),
		nil, want{verdict: engine.VerdictConflict, action: engine.ActionNone, holder: "m2", heldBefore: true}},
	{"first read: a lock this call wrote (a lost answer), the register another's: not held before, handed to the register's Machine",
		lockCall(engine.Observation{Lock: lockOf("m1", "mine", owned), Cluster: cluster(grantTo("m2", "t2")), Granted: machine("m2"), Tokens: []string{"mine"}, FirstRead: true}),
		nil, want{verdict: engine.VerdictConflict, action: engine.ActionYield, holder: "m2", recreated: true}},
	{"first read: another Machine's lock: not held before",
		lockCall(engine.Observation{Lock: lockOf("m2", "t2", owned), Cluster: cluster(grantTo("m2", "t2")), Holder: machine("m2"), Granted: machine("m2"), FirstRead: true}),
		nil, want{verdict: engine.VerdictHealthy, action: engine.ActionNone, holder: "m2"}},
	{"a claim of this call whose answer was lost, not in the register: fenced",
		lockCall(engine.Observation{Lock: upstreamLock("m2", owned), Cluster: cluster(), Holder: machine("m2"), Tokens: []string{"mine"}, ClaimUncertain: true}),
		nil, want{verdict: engine.VerdictHealthy, action: engine.ActionNone, register: engine.RegisterWithdraw, holder: "m2"}},
	{"a claim of this call whose answer was lost, the register another's: left",
		lockCall(engine.Observation{Lock: upstreamLock("m2", owned), Cluster: cluster(grantTo("m3", "t3")), Holder: machine("m2"), Granted: machine("m3"), Tokens: []string{"mine"}, ClaimUncertain: true}),
		nil, want{verdict: engine.VerdictConflict, action: engine.ActionNone, holder: "m3"}},
	{"a grant this call recorded, while a lock write of it may still land: kept",
		lockCall(engine.Observation{Lock: upstreamLock("m2", owned), Cluster: cluster(grantTo("m1", "mine")), Holder: machine("m2"), Tokens: []string{"mine"}, Uncertain: true}),
		nil, want{verdict: engine.VerdictConflict, action: engine.ActionNone, holder: "m2"}},

	// Lock: the caller's own lock.
	{"healthy re-lock: both name the caller exactly with one token: no write",
		lockCall(engine.Observation{Lock: lockOf("m1", "t1", owned), Cluster: cluster(grantTo("m1", "t1"))}),
		nil, want{verdict: engine.VerdictHealthy, action: engine.ActionNone, holder: "m1", acquired: true}},
	{"re-lock of an owned lock whose owner was stripped: adopted",
		lockCall(engine.Observation{Lock: lockOf("m1", "t1"), Cluster: cluster(grantTo("m1", "t1"))}),
		nil, want{verdict: engine.VerdictUnowned, action: engine.ActionAdopt, holder: "m1", acquired: true}},
	{"re-lock with different tokens (a release under way, a late write): both written again",
		lockCall(engine.Observation{Lock: lockOf("m1", "t1", owned), Cluster: cluster(grantTo("m1", "t2"))}),
		nil, want{verdict: engine.VerdictHealthy, action: engine.ActionTakeOver, register: engine.RegisterClaim, holder: "m1", acquired: true}},
	{"re-lock of a lock without a token (handed over to the caller): both written again",
		lockCall(engine.Observation{Lock: lockOf("m1", "", owned), Cluster: cluster(grantTo("m1", "t1"))}),
		nil, want{verdict: engine.VerdictHealthy, action: engine.ActionTakeOver, register: engine.RegisterClaim, holder: "m1", acquired: true}},
	{"re-lock with the register emptied: claimed again with the lock",
		lockCall(engine.Observation{Lock: lockOf("m1", "t1", owned), Cluster: cluster()}),
		nil, want{verdict: engine.VerdictHealthy, action: engine.ActionTakeOver, register: engine.RegisterClaim, holder: "m1", acquired: true}},
	{"lock lost while the caller is granted: claimed again and created",
		lockCall(engine.Observation{Cluster: cluster(grantTo("m1", "t1"))}),
		nil, want{verdict: engine.VerdictLost, action: engine.ActionCreate, register: engine.RegisterClaim, holder: "m1", acquired: true, recreated: true}},
	{"re-lock after a restore (records by name only): both written again, exactly",
		lockCall(engine.Observation{Lock: restoredLock("m1", "t1"), Cluster: cluster(restoredGrant("m1", "t1"))}),
		nil, want{verdict: engine.VerdictUnowned, action: engine.ActionTakeOver, register: engine.RegisterClaim, holder: "m1", acquired: true, readFirst: true}},
	{"the caller's upstream lock: claimed and rewritten",
		lockCall(engine.Observation{Lock: upstreamLock("m1", owned), Cluster: cluster()}),
		nil, want{verdict: engine.VerdictHealthy, action: engine.ActionTakeOver, register: engine.RegisterClaim, holder: "m1", acquired: true}},
	{"a Machine created again under the holder's name does not inherit its grant",
		lockCall(engine.Observation{Lock: lockOf("m1", "t1", owned), Cluster: cluster(grantTo("m1", "t1")), Caller: recreated("m1")}),
		nil, want{verdict: engine.VerdictStaleHolder, action: engine.ActionTakeOver, register: engine.RegisterClaim, holder: "m1", acquired: true}},

	// Lock: nobody holds it.
	{"the lock's holder is gone: taken over",
		lockCall(engine.Observation{Lock: lockOf("m2", "t2", owned), Cluster: cluster(grantTo("m2", "t2"))}),
		nil, want{verdict: engine.VerdictStaleHolder, action: engine.ActionTakeOver, register: engine.RegisterClaim, holder: "m1", acquired: true}},
	{"the granted Machine restored alone, or created again, under its name (another UID, the Cluster's kept): its grant keeps others out, and its lost lock is made again for it",
		lockCall(engine.Observation{Cluster: cluster(grantTo("m2", "t2")), Granted: recreated("m2")}),
		nil, want{verdict: engine.VerdictLost, action: engine.ActionRecreate, holder: "m2", recreated: true}},
	{"the holder restored alone, or created again, under its name (another UID, the Cluster's kept): another Machine is refused",
		lockCall(engine.Observation{Lock: lockOf("m2", "t2", owned), Cluster: cluster(grantTo("m2", "t2")), Holder: recreated("m2"), Granted: recreated("m2")}),
		nil, want{verdict: engine.VerdictHealthy, action: engine.ActionNone, holder: "m2"}},
	{"the holder restored alone, or created again, under its name asks: it takes its lock over",
		lockCall(engine.Observation{Lock: lockOf("m1", "t1", owned), Cluster: cluster(grantTo("m1", "t1")), Caller: recreated("m1"), Holder: recreated("m1"), Granted: recreated("m1")}),
		nil, want{verdict: engine.VerdictStaleHolder, action: engine.ActionTakeOver, register: engine.RegisterClaim, holder: "m1", acquired: true}},
	{"initialised: grants no longer count and none is written",
		lockCall(engine.Observation{Cluster: cluster(initialized, grantTo("m2", "t2")), Granted: machine("m2")}),
		nil, want{verdict: engine.VerdictFree, action: engine.ActionCreate, holder: "m1", acquired: true}},
	{"initialised, held by another existing Machine: refused",
		lockCall(engine.Observation{Lock: lockOf("m2", "t2", owned), Cluster: cluster(initialized), Holder: machine("m2")}),
		nil, want{verdict: engine.VerdictHeldAfterInit, action: engine.ActionNone, holder: "m2"}},
	{"foreign ConfigMap: refused",
		lockCall(engine.Observation{Lock: &engine.Lock{Name: "c1-lock", Problem: report.ErrNotALock}, Cluster: cluster()}),
		nil, want{verdict: engine.VerdictForeign, action: engine.ActionNone, err: report.ErrNotALock, wait: engine.WaitPerson}},
	{"corrupt lock: refused, and a grant this call recorded withdrawn",
		lockCall(engine.Observation{Lock: &engine.Lock{Name: "c1-lock", Problem: report.ErrCorruptLock}, Cluster: cluster(grantTo("m1", "mine")), Tokens: []string{"mine"}}),
		nil, want{verdict: engine.VerdictCorrupt, action: engine.ActionNone, register: engine.RegisterWithdraw, err: report.ErrCorruptLock, wait: engine.WaitPerson}},

	{"being deleted (another finalizer holds it), naming another existing Machine: refused",
		lockCall(engine.Observation{Lock: beingDeleted(upstreamLock("m2", owned)), Cluster: cluster(), Holder: machine("m2")}),
		nil, want{verdict: engine.VerdictHealthy, action: engine.ActionNone, holder: "m2", wait: engine.WaitDeleting}},
	{"being deleted, naming a gone Machine: counts as held, never taken over",
		lockCall(engine.Observation{Lock: beingDeleted(upstreamLock("m9", owned)), Cluster: cluster()}),
		nil, want{verdict: engine.VerdictStaleHolder, action: engine.ActionNone, holder: "m9", wait: engine.WaitDeleting}},
	{"being deleted, this call's own claim in the register: withdrawn, nothing else",
		lockCall(engine.Observation{Lock: beingDeleted(upstreamLock("m9", owned)), Cluster: cluster(grantTo("m1", "mine")), Tokens: []string{"mine"}}),
		nil, want{verdict: engine.VerdictStaleHolder, action: engine.ActionNone, register: engine.RegisterWithdraw, holder: "m9", wait: engine.WaitDeleting}},
	{"being deleted, both protections naming the caller with one token: it holds it, nothing written",
		lockCall(engine.Observation{Lock: beingDeleted(lockOf("m1", "t1", owned)), Cluster: cluster(grantTo("m1", "t1"))}),
		nil, want{verdict: engine.VerdictHealthy, action: engine.ActionNone, holder: "m1", acquired: true, wait: engine.WaitDeleting}},
	{"marked for release, the holder relies on it: adopted again, which drops the mark",
		lockCall(engine.Observation{Lock: releasable(lockOf("m1", "t1", owned)), Cluster: cluster(grantTo("m1", "t1"))}),
		nil, want{verdict: engine.VerdictHealthy, action: engine.ActionAdopt, holder: "m1", acquired: true}},
	{"marked for release, its holder gone: taken over (the rewrite drops the mark)",
		lockCall(engine.Observation{Lock: releasable(upstreamLock("m9", owned)), Cluster: cluster()}),
		nil, want{verdict: engine.VerdictStaleHolder, action: engine.ActionTakeOver, register: engine.RegisterClaim, holder: "m1", acquired: true}},

	// Unlock.
	{"unlock with a Cluster object of another incarnation (read before a restore): refused, nothing written",
		unlockCall(machine("m1"), engine.Observation{Lock: lockOf("m1", "t1", owned), Cluster: cluster(grantTo("m1", "t1")), CallerCluster: "old-c1-uid"}),
		nil, want{verdict: engine.VerdictHealthy, action: engine.ActionNone, holder: "m1", err: report.ErrStaleCluster}},
	{"unlock with the live Cluster's object: goes on",
		unlockCall(machine("m1"), engine.Observation{Lock: lockOf("m1", "t1", owned), Cluster: cluster(grantTo("m1", "t1")), CallerCluster: "c1-uid"}),
		nil, want{verdict: engine.VerdictHealthy, action: engine.ActionNone, register: engine.RegisterRetire, holder: "m1"}},
	{"operator's release with a Cluster object of another incarnation: bound by what it inspected instead, goes on",
		operator(engine.Observation{Lock: lockOf("m1", "t1", owned), Cluster: cluster(initialized, grantTo("m1", "t1")), Holder: machine("m1"), CallerCluster: "old-c1-uid"}),
		nil, want{verdict: engine.VerdictHeldAfterInit, action: engine.ActionRelease, holder: "m1"}},
	{"unlock: the grant is retired first",
		unlockCall(machine("m1"), engine.Observation{Lock: lockOf("m1", "t1", owned), Cluster: cluster(grantTo("m1", "t1"))}),
		nil, want{verdict: engine.VerdictHealthy, action: engine.ActionNone, register: engine.RegisterRetire, holder: "m1"}},
	{"unlock: once retired by this call, withdrawn and the lock deleted",
		unlockCall(machine("m1"), engine.Observation{Lock: lockOf("m1", "t1", owned), Cluster: cluster(grantTo("m1", "u1")), Tokens: []string{"u1"}}),
		nil, want{verdict: engine.VerdictHealthy, action: engine.ActionRelease, register: engine.RegisterWithdraw, holder: "m1"}},
	{"unlock: a lock alone is deleted",
		unlockCall(machine("m1"), engine.Observation{Lock: upstreamLock("m1", owned), Cluster: cluster()}),
		nil, want{verdict: engine.VerdictHealthy, action: engine.ActionRelease, holder: "m1"}},
	{"unlock by a deleted Machine's object does not release its successor",
		unlockCall(recreated("m1"), engine.Observation{Lock: lockOf("m1", "t1", owned), Cluster: cluster(grantTo("m1", "t1"))}),
		nil, want{verdict: engine.VerdictStaleHolder, action: engine.ActionNone, holder: "m1", err: report.ErrNotHolder}},
	{"unlock of another Machine's lock: refused",
		unlockCall(machine("m1"), engine.Observation{Lock: lockOf("m2", "t2", owned), Cluster: cluster(grantTo("m2", "t2")), Holder: machine("m2"), Granted: machine("m2")}),
		nil, want{verdict: engine.VerdictHealthy, action: engine.ActionNone, holder: "m2", err: report.ErrNotHolder}},
	{"unlock after a restore matches by name",
		unlockCall(machine("m1"), engine.Observation{Lock: restoredLock("m1", "t1"), Cluster: cluster()}),
		nil, want{verdict: engine.VerdictUnowned, action: engine.ActionRelease, holder: "m1"}},
	{"unlock after init leaves the register, which no longer counts",
		unlockCall(nil, engine.Observation{Lock: lockOf("m1", "t1", owned), Cluster: cluster(initialized, grantTo("m1", "t1"))}),
		nil, want{verdict: engine.VerdictHeldAfterInit, action: engine.ActionRelease, holder: "m1"}},
	{"unlock of any holder: a corrupt lock and a damaged register go together",
		unlockCall(nil, engine.Observation{Lock: &engine.Lock{Name: "c1-lock", Problem: report.ErrCorruptLock}, Cluster: cluster(damagedGrant)}),
		nil, want{verdict: engine.VerdictCorrupt, action: engine.ActionRelease, register: engine.RegisterWithdraw}},
	{"any holder, a later round: the lock its first read found, the grant it retired since: withdrawn and released",
		unlockCall(nil, pinned(engine.Observation{Lock: lockOf("m1", "t1", owned), Cluster: cluster(grantTo("m1", "u1")), Tokens: []string{"u1"}},
			lockOf("m1", "t1", owned), grantOfM1)),
		nil, want{verdict: engine.VerdictStaleHolder, action: engine.ActionRelease, register: engine.RegisterWithdraw, holder: "m1", reason: engine.ReasonUnlock}},
	{"any holder, a later round: a lock created since (another UID) and a grant claimed since by another call: nothing released, no error",
		unlockCall(nil, pinned(engine.Observation{Lock: otherUID(lockOf("m2", "t2", owned)), Cluster: cluster(grantTo("m2", "t2")), Tokens: []string{"u1"}},
			lockOf("m1", "t1", owned), grantOfM1)),
		nil, want{verdict: engine.VerdictStaleHolder, action: engine.ActionNone, holder: "m2"}},
	{"any holder, a later round: the lock taken over since by another Machine (same UID, another record): nothing released",
		unlockCall(nil, pinned(engine.Observation{Lock: lockOf("m2", "t2", owned), Cluster: cluster(grantTo("m2", "t2"))},
			upstreamLock("m1", owned), "")),
		nil, want{verdict: engine.VerdictStaleHolder, action: engine.ActionNone, holder: "m2"}},
	{"any holder, a later round: the lock its first read found is gone, a lock created since: nothing released",
		unlockCall(nil, pinned(engine.Observation{Lock: otherUID(upstreamLock("m2", owned)), Cluster: cluster()}, nil, "")),
		nil, want{verdict: engine.VerdictStaleHolder, action: engine.ActionNone, holder: "m2"}},
	{"operator, a later round: a lock created since by another Machine: nothing released",
		operator(unlockCall(nil, pinned(engine.Observation{Lock: otherUID(upstreamLock("m2", owned)), Cluster: cluster()}, upstreamLock("m1", owned), ""))),
		nil, want{verdict: engine.VerdictStaleHolder, action: engine.ActionNone, holder: "m2"}},
	{"operator, a later round: the lock its first read found rewritten since for its holder (same UID, another record): changed, nothing released",
		operator(unlockCall(nil, pinned(engine.Observation{Lock: lockOf("m1", "t2", owned), Cluster: cluster()}, upstreamLock("m1", owned), ""))),
		nil, want{verdict: engine.VerdictStaleHolder, action: engine.ActionNone, holder: "m1", err: engine.ErrChangedSince}},
	{"operator, a later round: the lock its first read found taken over since by another Machine: nothing released, no error",
		operator(unlockCall(nil, pinned(engine.Observation{Lock: lockOf("m2", "t2", owned), Cluster: cluster()}, upstreamLock("m1", owned), ""))),
		nil, want{verdict: engine.VerdictStaleHolder, action: engine.ActionNone, holder: "m2"}},
	{"operator, a later round: the grant its first read found rewritten since by another call: changed, nothing released",
		operator(unlockCall(nil, pinned(engine.Observation{Cluster: cluster(grantTo("m1", "t2"))}, nil, grantOfM1))),
		nil, want{verdict: engine.VerdictFree, action: engine.ActionNone, err: engine.ErrChangedSince}},
	{"operator, a later round: the grant it retired itself: withdrawn",
		operator(unlockCall(nil, pinned(engine.Observation{Cluster: cluster(grantTo("m1", "u1")), Tokens: []string{"u1"}}, nil, grantOfM1))),
		nil, want{verdict: engine.VerdictFree, action: engine.ActionNone, register: engine.RegisterWithdraw, reason: engine.ReasonUnlock}},
	{"the holder's own Unlock, a later round: its exact identity decides, not what the first read found",
		unlockCall(machine("m1"), pinned(engine.Observation{Lock: otherUID(lockOf("m1", "t9", owned)), Cluster: cluster()}, nil, "")),
		nil, want{verdict: engine.VerdictHealthy, action: engine.ActionRelease, holder: "m1", reason: engine.ReasonUnlock}},
	{"unlock never touches a foreign ConfigMap",
		unlockCall(nil, engine.Observation{Lock: &engine.Lock{Name: "c1-lock", Problem: report.ErrNotALock}, Cluster: cluster()}),
		nil, want{verdict: engine.VerdictForeign, action: engine.ActionNone, err: report.ErrNotALock}},
	{"unlock while paused: nothing",
		unlockCall(machine("m1"), engine.Observation{Lock: lockOf("m1", "t1", owned), Cluster: cluster(paused, grantTo("m1", "t1"))}),
		nil, want{verdict: engine.VerdictHealthy, action: engine.ActionNone, holder: "m1", err: report.ErrClusterPaused, wait: engine.WaitPaused}},
	{"unlock by an object of a Machine restored since: refused as stale, nothing written",
		unlockCall(restoredFrom("m1"), engine.Observation{Lock: restoredLock("m1", "t1"), Cluster: cluster(restoredGrant("m1", "t1")), CallerLive: machine("m1")}),
		nil, want{verdict: engine.VerdictUnowned, action: engine.ActionNone, holder: "m1", err: report.ErrStaleMachine}},
	{"unlock by an object whose Machine is gone: refused as stale, nothing written",
		callerGone(unlockCall(machine("m1"), engine.Observation{Lock: lockOf("m1", "t1", owned), Cluster: cluster(grantTo("m1", "t1"))})),
		nil, want{verdict: engine.VerdictStaleHolder, action: engine.ActionNone, holder: "m1", err: report.ErrStaleMachine}},
	{"unlock of a lock being deleted: it is going already",
		unlockCall(machine("m1"), engine.Observation{Lock: beingDeleted(upstreamLock("m1", owned)), Cluster: cluster()}),
		nil, want{verdict: engine.VerdictHealthy, action: engine.ActionNone, holder: "m1"}},
	{"unlock with nothing held: nothing",
		unlockCall(machine("m1"), engine.Observation{Cluster: cluster(released)}),
		nil, want{verdict: engine.VerdictFree, action: engine.ActionNone}},

	// An operator's release.
	{"release: the holder exists and the cluster is not initialised: refused without --force",
		operator(engine.Observation{Lock: lockOf("m1", "t1", owned), Cluster: cluster(grantTo("m1", "t1")), Holder: machine("m1"), Granted: machine("m1")}),
		nil, want{verdict: engine.VerdictHealthy, action: engine.ActionNone, holder: "m1", force: true, err: report.ErrNotHolder}},
	{"release: the holder exists and the cluster is not initialised: --force retires the grant",
		forced(engine.Observation{Lock: lockOf("m1", "t1", owned), Cluster: cluster(grantTo("m1", "t1")), Holder: machine("m1"), Granted: machine("m1")}),
		nil, want{verdict: engine.VerdictHealthy, action: engine.ActionNone, register: engine.RegisterRetire, holder: "m1", force: true}},
	{"release: the holder restored alone under its name (another UID, the Cluster's kept): refused without --force",
		operator(engine.Observation{Lock: lockOf("m1", "t1", owned), Cluster: cluster(grantTo("m1", "t1")), Holder: recreated("m1"), Granted: recreated("m1")}),
		nil, want{verdict: engine.VerdictHealthy, action: engine.ActionNone, holder: "m1", force: true, err: report.ErrNotHolder}},
	{"release: the granted Machine restored alone, its lock lost: refused without --force",
		operator(engine.Observation{Cluster: cluster(grantTo("m1", "t1")), Granted: recreated("m1")}),
		nil, want{verdict: engine.VerdictLost, action: engine.ActionNone, holder: "m1", force: true, err: report.ErrNotHolder}},
	{"release: the holder is gone: no --force",
		operator(engine.Observation{Lock: lockOf("m1", "t1", owned), Cluster: cluster(grantTo("m1", "t1"))}),
		nil, want{verdict: engine.VerdictStaleHolder, action: engine.ActionNone, register: engine.RegisterRetire, holder: "m1"}},
	{"release: initialised: no --force, the register is left",
		operator(engine.Observation{Lock: lockOf("m1", "t1", owned), Cluster: cluster(initialized, grantTo("m1", "t1")), Holder: machine("m1")}),
		nil, want{verdict: engine.VerdictHeldAfterInit, action: engine.ActionRelease, holder: "m1"}},
	{"release: lost lock of an existing granted Machine: refused without --force",
		operator(engine.Observation{Cluster: cluster(grantTo("m1", "t1")), Granted: machine("m1")}),
		nil, want{verdict: engine.VerdictLost, action: engine.ActionNone, holder: "m1", force: true, err: report.ErrNotHolder}},
	{"release: lost lock of an existing granted Machine: --force retires the grant",
		forced(engine.Observation{Cluster: cluster(grantTo("m1", "t1")), Granted: machine("m1")}),
		nil, want{verdict: engine.VerdictLost, action: engine.ActionNone, register: engine.RegisterRetire, holder: "m1", force: true}},
	{"release: corrupt lock of an uninitialised cluster: refused without --force",
		operator(engine.Observation{Lock: &engine.Lock{Name: "c1-lock", Problem: report.ErrCorruptLock}, Cluster: cluster()}),
		nil, want{verdict: engine.VerdictCorrupt, action: engine.ActionNone, force: true, err: report.ErrNotHolder}},
	{"release: corrupt lock of an uninitialised cluster: --force releases it",
		forced(engine.Observation{Lock: &engine.Lock{Name: "c1-lock", Problem: report.ErrCorruptLock}, Cluster: cluster()}),
		nil, want{verdict: engine.VerdictCorrupt, action: engine.ActionRelease, force: true}},
	{"release: corrupt lock of a missing cluster: refused without --force",
		operator(engine.Observation{Lock: &engine.Lock{Name: "c1-lock", Problem: report.ErrCorruptLock}}),
		nil, want{verdict: engine.VerdictCorrupt, action: engine.ActionNone, force: true, err: report.ErrNotHolder}},
	{"release: corrupt lock of a missing cluster: --force releases it",
		forced(engine.Observation{Lock: &engine.Lock{Name: "c1-lock", Problem: report.ErrCorruptLock}}),
		nil, want{verdict: engine.VerdictCorrupt, action: engine.ActionRelease, force: true}},
	{"release: cluster missing while the holder exists: refused without --force",
		operator(engine.Observation{Lock: lockOf("m1", "t1"), Holder: machine("m1")}),
		nil, want{verdict: engine.VerdictOrphan, action: engine.ActionNone, holder: "m1", force: true, err: report.ErrNotHolder}},
	{"release: cluster missing while the holder exists: --force releases it",
		forced(engine.Observation{Lock: lockOf("m1", "t1"), Holder: machine("m1")}),
		nil, want{verdict: engine.VerdictOrphan, action: engine.ActionRelease, holder: "m1", force: true}},

	// Keepers (the manager and kubectl initlock repair).
	{"keeper: healthy lock, nothing to do",
		engine.Observation{Lock: lockOf("m1", "t1", owned), Cluster: cluster(grantTo("m1", "t1")), Holder: machine("m1"), Granted: machine("m1")},
		nil, want{verdict: engine.VerdictHealthy, action: engine.ActionNone, holder: "m1"}},
	{"keeper: a restored held lock without owner is adopted",
		engine.Observation{Lock: upstreamLock("m1"), Cluster: cluster(), Holder: machine("m1")},
		nil, want{verdict: engine.VerdictUnowned, action: engine.ActionAdopt, holder: "m1"}},
	{"keeper: outside the watch filter: not adopted",
		engine.Observation{Lock: upstreamLock("m1"), Cluster: cluster(), Holder: machine("m1"), OutOfScope: true},
		nil, want{verdict: engine.VerdictUnowned, action: engine.ActionNone, holder: "m1"}},
	{"keeper: a lock naming a gone Machine, no grant: released for the next Machine",
		engine.Observation{Lock: upstreamLock("m9", owned), Cluster: cluster()},
		nil, want{verdict: engine.VerdictStaleHolder, action: engine.ActionRelease, holder: "m9", reason: engine.ReasonHolderGone}},
	{"keeper: a gone holder's lock created a minute ago (a restore may bring the holder after it): waits for the rest of the grace period, no write",
		engine.Observation{Lock: created(upstreamLock("m9", owned), t0.Add(-time.Minute)), Cluster: cluster()},
		nil, want{verdict: engine.VerdictStaleHolder, action: engine.ActionNone, holder: "m9", wait: engine.WaitHolderRestore, requeue: 9 * time.Minute}},
	{"keeper: an old lock of a gone holder, its Cluster restored a minute ago around it (the lock was kept): waits for the holder for the rest of the grace period, no write",
		engine.Observation{Lock: created(upstreamLock("m9", owned), t0.Add(-time.Hour)), Cluster: cluster(createdAt(t0.Add(-time.Minute)))},
		nil, want{verdict: engine.VerdictStaleHolder, action: engine.ActionNone, holder: "m9", wait: engine.WaitHolderRestore, requeue: 9 * time.Minute}},
	{"keeper: an old lock of a gone holder, its Cluster created the grace period ago: released",
		engine.Observation{Lock: created(upstreamLock("m9", owned), t0.Add(-time.Hour)), Cluster: cluster(createdAt(t0.Add(-10 * time.Minute)))},
		nil, want{verdict: engine.VerdictStaleHolder, action: engine.ActionRelease, holder: "m9", reason: engine.ReasonHolderGone}},
	{"keeper: a gone holder's lock created the grace period ago: released",
		engine.Observation{Lock: created(upstreamLock("m9", owned), t0.Add(-10*time.Minute)), Cluster: cluster()},
		nil, want{verdict: engine.VerdictStaleHolder, action: engine.ActionRelease, holder: "m9", reason: engine.ReasonHolderGone}},
	{"keeper: a gone holder's lock outside the watch filter: released all the same",
		engine.Observation{Lock: upstreamLock("m9"), Cluster: cluster(), OutOfScope: true},
		nil, want{verdict: engine.VerdictStaleHolder, action: engine.ActionRelease, holder: "m9", reason: engine.ReasonHolderGone}},
	{"keeper: a gone holder's lock while the register grants another existing Machine: left for the hand-over",
		engine.Observation{Lock: lockOf("m9", "t9", owned), Cluster: cluster(grantTo("m2", "t2")), Granted: machine("m2")},
		nil, want{verdict: engine.VerdictStaleHolder, action: engine.ActionNone, holder: "m9", wait: engine.WaitTakeOver}},
	{"keeper: a lock whose holder was restored alone, or created again, under its name (another UID, the Cluster's kept): held",
		engine.Observation{Lock: lockOf("m1", "t1", owned), Cluster: cluster(grantTo("m1", "t1")), Holder: recreated("m1"), Granted: recreated("m1")},
		nil, want{verdict: engine.VerdictHealthy, action: engine.ActionNone, holder: "m1"}},
	{"keeper: an upstream lock whose holder was restored alone under its name: held",
		engine.Observation{Lock: upstreamLock("m1", owned), Cluster: cluster(), Holder: recreated("m1")},
		nil, want{verdict: engine.VerdictHealthy, action: engine.ActionNone, holder: "m1"}},
	{"keeper: being deleted, held back by another finalizer: nothing, it is going",
		engine.Observation{Lock: beingDeleted(upstreamLock("m9", owned)), Cluster: cluster()},
		nil, want{verdict: engine.VerdictStaleHolder, action: engine.ActionNone, holder: "m9", wait: engine.WaitDeleting}},
	{"keeper: marked for release while its holder exists (a releaser stopped after its mark, the holder came back): the mark taken off",
		engine.Observation{Lock: releasable(upstreamLock("m1", owned)), Cluster: cluster(), Holder: machine("m1")},
		nil, want{verdict: engine.VerdictHealthy, action: engine.ActionUnmark, holder: "m1"}},
	{"keeper: marked for release while the register still grants its holder under the lock's token (a release cut off): the mark taken off",
		engine.Observation{Lock: releasable(lockOf("m1", "t1", owned)), Cluster: cluster(grantTo("m1", "t1")), Holder: machine("m1"), Granted: machine("m1")},
		nil, want{verdict: engine.VerdictHealthy, action: engine.ActionUnmark, holder: "m1"}},
	{"keeper: marked for release 5 s ago (a release under way, its delete following): left to it, looked at again once its grace has passed",
		engine.Observation{Lock: releaseStarted(releasable(lockOf("m1", "t1", owned)), t0.Add(-5*time.Second)), Cluster: cluster(released), Holder: machine("m1")},
		nil, want{verdict: engine.VerdictHealthy, action: engine.ActionNone, holder: "m1", requeue: 25 * time.Second}},
	{"keeper: marked for release two minutes ago while its holder exists (the release stopped half-way): the mark taken off",
		engine.Observation{Lock: releaseStarted(releasable(upstreamLock("m1", owned)), t0.Add(-2*time.Minute)), Cluster: cluster(), Holder: machine("m1")},
		nil, want{verdict: engine.VerdictHealthy, action: engine.ActionUnmark, holder: "m1"}},
	{"keeper: a stock provider's lock marked for release while the register records an earlier release: the mark taken off",
		engine.Observation{Lock: releasable(upstreamLock("m1", owned)), Cluster: cluster(released), Holder: machine("m1")},
		nil, want{verdict: engine.VerdictHealthy, action: engine.ActionUnmark, holder: "m1"}},
	{"keeper: marked for release after init, release disabled: left (no Machine relies on it)",
		engine.Observation{Lock: releasable(upstreamLock("m1", owned)), Cluster: cluster(initialized), Holder: machine("m1")},
		&engine.Policy{OrphanGrace: time.Minute}, want{verdict: engine.VerdictHeldAfterInit, action: engine.ActionNone, holder: "m1"}},
	{"keeper: marked for release outside the watch filter: the mark taken off all the same (it only protects)",
		engine.Observation{Lock: releasable(upstreamLock("m1", owned)), Cluster: cluster(), Holder: machine("m1"), OutOfScope: true},
		nil, want{verdict: engine.VerdictHealthy, action: engine.ActionUnmark, holder: "m1"}},
	{"keeper: marked, unowned, in scope: adopted, which takes the mark off too",
		engine.Observation{Lock: releasable(upstreamLock("m1")), Cluster: cluster(), Holder: machine("m1")},
		nil, want{verdict: engine.VerdictUnowned, action: engine.ActionAdopt, holder: "m1"}},
	{"keeper: marked, its holder not back yet from a restore (younger than the grace period): waits for it, the mark taken off meanwhile",
		engine.Observation{Lock: created(moveMarked(upstreamLock("m9", owned)), t0.Add(-time.Minute)), Cluster: cluster()},
		nil, want{verdict: engine.VerdictStaleHolder, action: engine.ActionUnmark, holder: "m9", wait: engine.WaitHolderRestore, requeue: 9 * time.Minute}},
	{"keeper: marked, its Cluster being deleted while its holder exists: waits, the mark taken off meanwhile",
		engine.Observation{Lock: releasable(upstreamLock("m1", owned)), Cluster: cluster(deleting), Holder: machine("m1")},
		nil, want{verdict: engine.VerdictHealthy, action: engine.ActionUnmark, holder: "m1", wait: engine.WaitHolder}},
	{"keeper: a restored orphan carrying delete-for-move, its holder existing: waits for its Cluster, the mark taken off meanwhile",
		engine.Observation{Lock: moveMarked(withMark(upstreamLock("m1"), t0.Add(-time.Minute))), Holder: machine("m1")},
		nil, want{verdict: engine.VerdictOrphan, action: engine.ActionUnmark, holder: "m1", wait: engine.WaitGrace, requeue: 9 * time.Minute, reason: engine.ReasonOrphan}},
	{"keeper: clusterctl move's delete-for-move on the lock of an unpaused Cluster (a move that stopped half-way): taken off",
		engine.Observation{Lock: moveMarked(upstreamLock("m1", owned)), Cluster: cluster(), Holder: machine("m1")},
		nil, want{verdict: engine.VerdictHealthy, action: engine.ActionUnmark, holder: "m1"}},
	{"keeper: delete-for-move on the lock of a paused Cluster (a move under way): left",
		engine.Observation{Lock: moveMarked(upstreamLock("m1", owned)), Cluster: cluster(paused), Holder: machine("m1")},
		nil, want{verdict: engine.VerdictHealthy, action: engine.ActionNone, holder: "m1", err: report.ErrClusterPaused, wait: engine.WaitPaused}},
	{"keeper: marked for release, its holder gone: released (the delete only)",
		engine.Observation{Lock: releasable(upstreamLock("m9", owned)), Cluster: cluster()},
		nil, want{verdict: engine.VerdictStaleHolder, action: engine.ActionRelease, holder: "m9", reason: engine.ReasonHolderGone}},
	{"keeper: owner pointing at another cluster is replaced",
		engine.Observation{Lock: upstreamLock("m1", ownerRef("c9", "c9-uid")), Cluster: cluster(), Holder: machine("m1")},
		nil, want{verdict: engine.VerdictUnowned, action: engine.ActionAdopt, holder: "m1"}},
	{"keeper: two owner refs to the cluster are reduced to one",
		engine.Observation{Lock: upstreamLock("m1", owned, owned), Cluster: cluster(), Holder: machine("m1")},
		nil, want{verdict: engine.VerdictUnowned, action: engine.ActionAdopt, holder: "m1"}},
	{"keeper: paused cluster is left alone",
		engine.Observation{Lock: upstreamLock("m1"), Cluster: cluster(paused), Holder: machine("m1")},
		nil, want{verdict: engine.VerdictUnowned, action: engine.ActionNone, holder: "m1", err: report.ErrClusterPaused, wait: engine.WaitPaused}},
	{"keeper: initialised cluster, lock released",
		engine.Observation{Lock: upstreamLock("m1", owned), Cluster: cluster(initialized), Holder: machine("m1")},
		nil, want{verdict: engine.VerdictHeldAfterInit, action: engine.ActionRelease, holder: "m1", reason: engine.ReasonInitialized}},
	{"keeper: initialised cluster, release disabled, unowned lock adopted",
		engine.Observation{Lock: upstreamLock("m1"), Cluster: cluster(initialized), Holder: machine("m1")},
		&engine.Policy{OrphanGrace: time.Minute}, want{verdict: engine.VerdictHeldAfterInit, action: engine.ActionAdopt, holder: "m1"}},
	{"keeper: a conflict is left to a person",
		engine.Observation{Lock: lockOf("m1", "t1", owned), Cluster: cluster(grantTo("m2", "t2")), Holder: machine("m1"), Granted: machine("m2")},
		nil, want{verdict: engine.VerdictConflict, action: engine.ActionNone, holder: "m2", wait: engine.WaitPerson}},
	{"keeper: a damaged register is left to a person",
		engine.Observation{Lock: lockOf("m1", "t1", owned), Cluster: cluster(damagedGrant), Holder: machine("m1")},
		nil, want{verdict: engine.VerdictCorrupt, action: engine.ActionNone, holder: "m1", err: report.ErrCorruptLock, wait: engine.WaitPerson}},
	{"keeper: deleting cluster, holder gone, lock without owner: released",
		engine.Observation{Lock: upstreamLock("m1"), Cluster: cluster(deleting)},
		nil, want{verdict: engine.VerdictStaleHolder, action: engine.ActionRelease, holder: "m1", reason: engine.ReasonClusterDeleting}},
	{"keeper: deleting cluster, holder gone, owned lock: released (the admission policy refuses the garbage collector's delete)",
		engine.Observation{Lock: upstreamLock("m1", owned), Cluster: cluster(deleting)},
		nil, want{verdict: engine.VerdictStaleHolder, action: engine.ActionRelease, holder: "m1", reason: engine.ReasonClusterDeleting}},
	{"keeper: deleting cluster, holder exists: the lock stays (a stock provider would grant it again)",
		engine.Observation{Lock: upstreamLock("m1", owned), Cluster: cluster(deleting), Holder: machine("m1")},
		nil, want{verdict: engine.VerdictHealthy, action: engine.ActionNone, holder: "m1", wait: engine.WaitHolder}},
	{"keeper: deleting cluster, holder gone, a grant names another Machine: the lock stays",
		engine.Observation{Lock: lockOf("m1", "t1", owned), Cluster: cluster(deleting, grantTo("m2", "t2")), Granted: machine("m2")},
		nil, want{verdict: engine.VerdictStaleHolder, action: engine.ActionNone, holder: "m1", wait: engine.WaitHolder}},
	{"keeper: orphan without mark is marked",
		engine.Observation{Lock: upstreamLock("m1", ownerRef("c1", "old-uid"))},
		nil, want{verdict: engine.VerdictOrphan, action: engine.ActionMarkOrphan, holder: "m1", requeue: 10 * time.Minute}},
	{"keeper: orphan carrying a release mark left behind: marked, the release mark taken off in the same write",
		engine.Observation{Lock: releaseStarted(releasable(upstreamLock("m1", ownerRef("c1", "old-uid"))), t0.Add(-2*time.Minute))},
		nil, want{verdict: engine.VerdictOrphan, action: engine.ActionMarkOrphan, holder: "m1", requeue: 10 * time.Minute, unmark: true}},
	{"keeper: orphan carrying a failed move's mark: marked, the move's mark taken off in the same write",
		engine.Observation{Lock: moveMarked(upstreamLock("m1", ownerRef("c1", "old-uid")))},
		nil, want{verdict: engine.VerdictOrphan, action: engine.ActionMarkOrphan, holder: "m1", requeue: 10 * time.Minute, unmark: true}},
	{"keeper: orphan whose release is under way: marked, the release mark left to it",
		engine.Observation{Lock: releaseStarted(releasable(upstreamLock("m1", ownerRef("c1", "old-uid"))), t0.Add(-5*time.Second))},
		nil, want{verdict: engine.VerdictOrphan, action: engine.ActionMarkOrphan, holder: "m1", requeue: 10 * time.Minute}},
	{"keeper: orphan first seen now, with a settle time: waits for it, no write",
		engine.Observation{Lock: upstreamLock("m1", ownerRef("c1", "old-uid"))},
		&settlePolicy, want{verdict: engine.VerdictOrphan, action: engine.ActionNone, holder: "m1", requeue: 30 * time.Second, wait: engine.WaitSettle}},
	{"keeper: orphan seen absent for part of the settle time: waits for the rest",
		engine.Observation{Lock: upstreamLock("m1", ownerRef("c1", "old-uid")), AbsentSince: ptr(t0.Add(-20 * time.Second))},
		&settlePolicy, want{verdict: engine.VerdictOrphan, action: engine.ActionNone, holder: "m1", requeue: 10 * time.Second, wait: engine.WaitSettle}},
	{"keeper: orphan seen absent for the settle time: marked from the first sight, the grace not lengthened",
		engine.Observation{Lock: upstreamLock("m1", ownerRef("c1", "old-uid")), AbsentSince: ptr(t0.Add(-30 * time.Second))},
		&settlePolicy, want{verdict: engine.VerdictOrphan, action: engine.ActionMarkOrphan, holder: "m1", requeue: 10*time.Minute - 30*time.Second}},
	{"keeper: a settle time longer than the grace counts as the grace",
		engine.Observation{Lock: upstreamLock("m1", ownerRef("c1", "old-uid")), AbsentSince: ptr(t0.Add(-10 * time.Minute))},
		&longSettlePolicy, want{verdict: engine.VerdictOrphan, action: engine.ActionMarkOrphan, holder: "m1", requeue: time.Second}},
	{"keeper: an absence seen since a time to come counts from now",
		engine.Observation{Lock: upstreamLock("m1", ownerRef("c1", "old-uid")), AbsentSince: ptr(t0.Add(time.Minute))},
		&settlePolicy, want{verdict: engine.VerdictOrphan, action: engine.ActionNone, holder: "m1", requeue: 30 * time.Second, wait: engine.WaitSettle}},
	{"keeper: paused cluster without a lock: nothing decided",
		engine.Observation{Cluster: cluster(paused, grantTo("m1", "t1")), Granted: machine("m1")},
		nil, want{verdict: engine.VerdictLost, action: engine.ActionNone, holder: "m1", err: report.ErrClusterPaused, wait: engine.WaitPaused}},
	{"keeper: paused cluster with a corrupt lock: nothing decided, no warning yet",
		engine.Observation{Lock: &engine.Lock{Name: "c1-lock", Problem: report.ErrCorruptLock}, Cluster: cluster(paused)},
		nil, want{verdict: engine.VerdictCorrupt, action: engine.ActionNone, err: report.ErrClusterPaused, wait: engine.WaitPaused}},
	{"keeper: orphan within grace waits",
		engine.Observation{Lock: withMark(upstreamLock("m1"), t0.Add(-4*time.Minute))},
		nil, want{verdict: engine.VerdictOrphan, action: engine.ActionNone, holder: "m1", requeue: 6 * time.Minute, wait: engine.WaitGrace}},
	{"keeper: orphan past grace with holder gone is collected",
		engine.Observation{Lock: withMark(upstreamLock("m1"), t0.Add(-10*time.Minute))},
		nil, want{verdict: engine.VerdictOrphan, action: engine.ActionCollect, holder: "m1"}},
	{"keeper: orphan past grace whose holder exists is kept",
		engine.Observation{Lock: withMark(upstreamLock("m1"), t0.Add(-time.Hour)), Holder: machine("m1")},
		nil, want{verdict: engine.VerdictOrphan, action: engine.ActionNone, holder: "m1", requeue: 10 * time.Minute, wait: engine.WaitHolder}},
	{"keeper: cluster back after a mark: adopted, which drops the mark",
		engine.Observation{Lock: withMark(upstreamLock("m1", owned), t0), Cluster: cluster(), Holder: machine("m1")},
		nil, want{verdict: engine.VerdictHealthy, action: engine.ActionAdopt, holder: "m1"}},
	{"keeper: foreign ConfigMap is never touched",
		engine.Observation{Lock: &engine.Lock{Name: "c1-lock", Problem: report.ErrNotALock}, Cluster: cluster(initialized)},
		nil, want{verdict: engine.VerdictForeign, action: engine.ActionNone, err: report.ErrNotALock, wait: engine.WaitPerson}},
	{"keeper: corrupt lock is left for a person",
		engine.Observation{Lock: &engine.Lock{Name: "c1-lock", Problem: report.ErrCorruptLock}, Cluster: cluster(initialized)},
		nil, want{verdict: engine.VerdictCorrupt, action: engine.ActionNone, err: report.ErrCorruptLock, wait: engine.WaitPerson}},
	{"keeper: no lock and no grant is free",
		engine.Observation{Cluster: cluster()},
		nil, want{verdict: engine.VerdictFree, action: engine.ActionNone}},
	{"keeper: no lock but a grant is lost; keepers do not recreate",
		engine.Observation{Cluster: cluster(grantTo("m1", "t1")), Granted: machine("m1")},
		nil, want{verdict: engine.VerdictLost, action: engine.ActionNone, holder: "m1", wait: engine.WaitLockRecreated}},
	{"keeper: no lock and a grant to a Machine that is gone is free",
		engine.Observation{Cluster: cluster(grantTo("m1", "t1"))},
		nil, want{verdict: engine.VerdictFree, action: engine.ActionNone}},
}

func TestDecide(t *testing.T) {
	for _, tt := range decideRows {
		t.Run(tt.name, func(t *testing.T) {
			p := engine.DefaultPolicy
			if tt.policy != nil {
				p = *tt.policy
			}
			tt.obs.ClusterName = "c1"
			d := engine.Decide(tt.obs, p, t0)
			w := tt.want
			if d.Verdict != w.verdict || d.Action != w.action || d.Register != w.register || d.Holder != w.holder ||
				d.Acquired != w.acquired || d.Recreated != w.recreated ||
				d.CompletesClaim != w.completes || d.ReadCallerFirst != w.readFirst || d.Landed != w.landed || d.HeldBefore != w.heldBefore || d.Unmark != w.unmark || d.Wait != w.wait || d.NeedsForce != w.force || d.RequeueAfter != w.requeue ||
				(w.reason != "" && d.Reason != w.reason) {
				t.Errorf("Decide() = %s (acquired %t, recreated %t, completes %t, readFirst %t, heldBefore %t, wait %q, force %t)\nwant %+v", d, d.Acquired, d.Recreated, d.CompletesClaim, d.ReadCallerFirst, d.HeldBefore, d.Wait, d.NeedsForce, w)
			}
			if (w.err == nil) != (d.Err == nil) || (w.err != nil && !errors.Is(d.Err, w.err)) {
				t.Errorf("Decide().Err = %v, want %v", d.Err, w.err)
			}
		})
	}
}

func ptr[T any](v T) *T { return &v }

// settlePolicy is the manager's: an orphan's absence is recorded once it
// has been seen for 30 s.
var settlePolicy = func() engine.Policy {
	p := engine.DefaultPolicy
	p.OrphanSettle = 30 * time.Second
	return p
}()

// longSettlePolicy has a settle time longer than the grace period.
var longSettlePolicy = func() engine.Policy {
	p := engine.DefaultPolicy
	p.OrphanSettle = time.Hour
	return p
}()
