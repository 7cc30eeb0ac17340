package initlock_test

import (
	"errors"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/initlock/initlock/pkg/initlock"
)

var t0 = time.Date(2026, 12, 2, 12, 0, 0, 0, time.UTC)

// lockOf builds an observed lock of cluster c1 (UID c1-uid) written by
// initlock for holder with token, owned by owners. An empty token is a lock
// written without one (handed over, or by an older initlock).
func lockOf(holder, token string, owners ...metav1.OwnerReference) *initlock.Lock {
	return &initlock.Lock{
		Namespace: "ns", Name: "c1-lock", UID: "lock-uid", ResourceVersion: "7",
		Record: initlock.Record{Ref: initlock.Ref{MachineName: holder, MachineUID: types.UID(holder + "-uid"), ClusterUID: "c1-uid"},
			Token: token, AcquiredAt: &t0},
		OwnerReferences: owners,
	}
}

// upstreamLock builds a lock as the upstream providers write it: the
// holder's name only.
func upstreamLock(holder string, owners ...metav1.OwnerReference) *initlock.Lock {
	return &initlock.Lock{Namespace: "ns", Name: "c1-lock", UID: "lock-uid", ResourceVersion: "7",
		Record: initlock.Record{Ref: initlock.Ref{MachineName: holder}}, OwnerReferences: owners}
}

// protected is l carrying HeldFinalizer, beingDeleted l being deleted, and
// disarmed l disarmed for holder since then.
func protected(l *initlock.Lock) *initlock.Lock    { l.Protected = true; return l }
func beingDeleted(l *initlock.Lock) *initlock.Lock { l.Deleting = true; return l }
func disarmed(l *initlock.Lock, holder string, since time.Time) *initlock.Lock {
	l.Disarmed = &initlock.Disarm{Holder: holder, Since: since}
	l.Record.MachineName = initlock.DisarmedHolder
	return l
}

// handedOver is the lock a refused caller wrote for holder, the Machine the
// register named: no token.
func handedOver(holder string) *initlock.Lock {
	l := lockOf(holder, "", owned)
	l.Record.HandedOverBy = "m3"
	return l
}

// restoredLock is lockOf written before a restore: the Cluster and the
// holder had other UIDs.
func restoredLock(holder, token string) *initlock.Lock {
	l := lockOf(holder, token)
	l.Record.MachineUID, l.Record.ClusterUID = "old-"+l.Record.MachineUID, "old-c1-uid"
	return l
}

func ownerRef(name string, uid types.UID) metav1.OwnerReference {
	return metav1.OwnerReference{APIVersion: "cluster.x-k8s.io/v1beta2", Kind: "Cluster", Name: name, UID: uid}
}

var owned = ownerRef("c1", "c1-uid")

func cluster(mods ...func(*initlock.Cluster)) *initlock.Cluster {
	c := &initlock.Cluster{Namespace: "ns", Name: "c1", UID: "c1-uid", APIVersion: "cluster.x-k8s.io/v1beta2"}
	for _, m := range mods {
		m(c)
	}
	return c
}

func machine(name string) *initlock.Machine {
	return &initlock.Machine{Namespace: "ns", Name: name, UID: types.UID(name + "-uid"), APIVersion: "cluster.x-k8s.io/v1beta2"}
}

// recreated is machine name created again: same name, another UID.
func recreated(name string) *initlock.Machine {
	m := machine(name)
	m.UID = "new-" + m.UID
	return m
}

func register(value string) func(*initlock.Cluster) {
	return func(c *initlock.Cluster) {
		c.Grant = initlock.GrantFrom(map[string]string{initlock.GrantAnnotation: value})
	}
}

// grantTo records a grant to name (UID name-uid, Cluster UID c1-uid) with
// token.
func grantTo(name, token string) func(*initlock.Cluster) {
	return register(`{"machineName":"` + name + `","machineUID":"` + name + `-uid","clusterUID":"c1-uid","token":"` + token + `"}`)
}

// restoredGrant is grantTo recorded before a restore.
func restoredGrant(name, token string) func(*initlock.Cluster) {
	return register(`{"machineName":"` + name + `","machineUID":"old-` + name + `-uid","clusterUID":"old-c1-uid","token":"` + token + `"}`)
}

var (
	released     = register(`{"machineName":"","token":"t0","releasedAt":"2026-12-02T11:00:00Z"}`)
	damagedGrant = register("not json")
	paused       = func(c *initlock.Cluster) { c.Paused = true }
	initialized  = func(c *initlock.Cluster) { c.Initialized = true }
	deleting     = func(c *initlock.Cluster) { c.Deleting = true }
)

func withMark(l *initlock.Lock, since time.Time) *initlock.Lock {
	l.ClusterAbsentSince = &since
	return l
}

// lockCall is an Observation of m1 calling Lock.
func lockCall(o initlock.Observation) initlock.Observation {
	o.Intent = initlock.IntentLock
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
func unlockCall(caller *initlock.Machine, o initlock.Observation) initlock.Observation {
	o.Intent, o.Caller = initlock.IntentUnlock, caller
	if o.CallerLive == nil {
		o.CallerLive = caller
	}
	return o
}

// callerGone is o with no live Machine of the caller's name.
func callerGone(o initlock.Observation) initlock.Observation {
	o.CallerLive = nil
	return o
}

// restoredFrom is an object of machine name read before a restore: the
// UID it had then.
func restoredFrom(name string) *initlock.Machine {
	m := machine(name)
	m.UID = "old-" + m.UID
	return m
}

func operator(o initlock.Observation) initlock.Observation {
	o.Intent = initlock.IntentRelease
	return o
}

type want struct {
	verdict  initlock.Verdict
	action   initlock.Action
	register initlock.RegisterOp
	holder   string
	acquired bool
	err      error
	wait     initlock.Wait
	force    bool
	requeue  time.Duration
}

// decideRows is the decision table: one row per rule. Every row is also
// checked against the properties of TestDecideProperties.
var decideRows = []struct {
	name   string
	obs    initlock.Observation
	policy *initlock.Policy
	want   want
}{
	// Lock: the free path and its variants.
	{"free: claim the register and create the lock",
		lockCall(initlock.Observation{Cluster: cluster()}),
		nil, want{verdict: initlock.VerdictFree, action: initlock.ActionCreate, register: initlock.RegisterClaim, holder: "m1", acquired: true}},
	{"free after a release: the released register is empty",
		lockCall(initlock.Observation{Cluster: cluster(released)}),
		nil, want{verdict: initlock.VerdictFree, action: initlock.ActionCreate, register: initlock.RegisterClaim, holder: "m1", acquired: true}},
	{"paused: nothing, even when free",
		lockCall(initlock.Observation{Cluster: cluster(paused)}),
		nil, want{verdict: initlock.VerdictFree, action: initlock.ActionNone, err: initlock.ErrClusterPaused, wait: initlock.WaitPaused}},
	{"paused live after this call wrote the lock, its grant gone: nothing (no write races the pause test)",
		lockCall(initlock.Observation{Lock: lockOf("m1", "mine", owned), Cluster: cluster(paused), Tokens: []string{"mine"}}),
		nil, want{verdict: initlock.VerdictHealthy, action: initlock.ActionNone, holder: "m1", err: initlock.ErrClusterPaused, wait: initlock.WaitPaused}},
	{"paused live, the lock this call created stands with its grant: nothing",
		lockCall(initlock.Observation{Lock: lockOf("m1", "mine", owned), Cluster: cluster(paused, grantTo("m1", "mine")), Tokens: []string{"mine"}}),
		nil, want{verdict: initlock.VerdictHealthy, action: initlock.ActionNone, holder: "m1", err: initlock.ErrClusterPaused, wait: initlock.WaitPaused}},
	{"paused live, a lock of an earlier call: nothing",
		lockCall(initlock.Observation{Lock: lockOf("m1", "t1", owned), Cluster: cluster(paused), Tokens: []string{"mine"}}),
		nil, want{verdict: initlock.VerdictHealthy, action: initlock.ActionNone, holder: "m1", err: initlock.ErrClusterPaused, wait: initlock.WaitPaused}},
	{"cluster gone",
		lockCall(initlock.Observation{}),
		nil, want{verdict: initlock.VerdictFree, action: initlock.ActionNone, err: initlock.ErrClusterGone}},
	{"the caller's object is a deleted Machine's (the live one has another UID): refused",
		lockCall(initlock.Observation{Cluster: cluster(), CallerLive: recreated("m1")}),
		nil, want{verdict: initlock.VerdictFree, action: initlock.ActionNone, err: initlock.ErrStaleMachine}},
	{"the caller's Machine is gone: refused",
		initlock.Observation{Intent: initlock.IntentLock, Caller: machine("m1"), Cluster: cluster()},
		nil, want{verdict: initlock.VerdictFree, action: initlock.ActionNone, err: initlock.ErrStaleMachine}},
	{"damaged register: refused, even with no lock",
		lockCall(initlock.Observation{Cluster: cluster(damagedGrant)}),
		nil, want{verdict: initlock.VerdictCorrupt, action: initlock.ActionNone, err: initlock.ErrCorruptLock, wait: initlock.WaitPerson}},

	// Lock: the register protects another Machine.
	{"lost lock: recreated for the granted Machine, caller refused",
		lockCall(initlock.Observation{Cluster: cluster(grantTo("m2", "t2")), Granted: machine("m2")}),
		nil, want{verdict: initlock.VerdictLost, action: initlock.ActionRecreate, holder: "m2"}},
	{"after a restore (new Cluster UID) the grant names its Machine by name",
		lockCall(initlock.Observation{Cluster: cluster(restoredGrant("m2", "t2")), Granted: machine("m2")}),
		nil, want{verdict: initlock.VerdictLost, action: initlock.ActionRecreate, holder: "m2"}},
	{"held by the granted Machine through both: refused",
		lockCall(initlock.Observation{Lock: lockOf("m2", "t2", owned), Cluster: cluster(grantTo("m2", "t2")), Holder: machine("m2"), Granted: machine("m2")}),
		nil, want{verdict: initlock.VerdictHealthy, action: initlock.ActionNone, holder: "m2"}},
	{"a lock this call wrote while another Machine is granted: handed to it",
		lockCall(initlock.Observation{Lock: lockOf("m1", "mine", owned), Cluster: cluster(grantTo("m2", "t2")), Granted: machine("m2"), Tokens: []string{"mine"}}),
		nil, want{verdict: initlock.VerdictConflict, action: initlock.ActionYield, holder: "m2"}},
	{"a lock naming a gone Machine while another is granted: handed to the granted one",
		lockCall(initlock.Observation{Lock: lockOf("m3", "t3", owned), Cluster: cluster(grantTo("m2", "t2")), Granted: machine("m2")}),
		nil, want{verdict: initlock.VerdictStaleHolder, action: initlock.ActionYield, holder: "m2"}},
	{"the caller's lock from an earlier grant while the register names another: a conflict, nothing written",
		lockCall(initlock.Observation{Lock: lockOf("m1", "t1", owned), Cluster: cluster(grantTo("m2", "t2")), Granted: machine("m2")}),
		nil, want{verdict: initlock.VerdictConflict, action: initlock.ActionNone, holder: "m2"}},
	{"the lock names a third existing Machine while the register names another: a conflict, nothing written",
		lockCall(initlock.Observation{Lock: lockOf("m3", "t3", owned), Cluster: cluster(grantTo("m2", "t2")), Holder: machine("m3"), Granted: machine("m2")}),
		nil, want{verdict: initlock.VerdictConflict, action: initlock.ActionNone, holder: "m2"}},

	// Lock: the lock protects another Machine.
	{"upstream lock of an existing Machine, register empty: refused",
		lockCall(initlock.Observation{Lock: upstreamLock("m2", owned), Cluster: cluster(), Holder: machine("m2")}),
		nil, want{verdict: initlock.VerdictHealthy, action: initlock.ActionNone, holder: "m2"}},
	{"register lost, the lock still names an existing Machine: refused (defence in depth)",
		lockCall(initlock.Observation{Lock: lockOf("m2", "t2", owned), Cluster: cluster(), Holder: machine("m2")}),
		nil, want{verdict: initlock.VerdictHealthy, action: initlock.ActionNone, holder: "m2"}},
	{"register released, the lock still names an existing Machine: refused",
		lockCall(initlock.Observation{Lock: lockOf("m2", "t2", owned), Cluster: cluster(released), Holder: machine("m2")}),
		nil, want{verdict: initlock.VerdictHealthy, action: initlock.ActionNone, holder: "m2"}},
	{"the register names the caller from an earlier call, the lock another Machine: refused, grant kept",
		lockCall(initlock.Observation{Lock: upstreamLock("m2", owned), Cluster: cluster(grantTo("m1", "t1")), Holder: machine("m2")}),
		nil, want{verdict: initlock.VerdictConflict, action: initlock.ActionNone, holder: "m2"}},
	{"this call's claim stands (its answer was lost), no lock: completed with the claim's token, no new claim",
		lockCall(initlock.Observation{Cluster: cluster(grantTo("m1", "mine")), Tokens: []string{"mine"}, ClaimUncertain: true}),
		nil, want{verdict: initlock.VerdictLost, action: initlock.ActionCreate, holder: "m1", acquired: true}},
	{"this call's claim stands for a Machine restored since (by name only): claimed again, not completed",
		lockCall(initlock.Observation{Cluster: cluster(restoredGrant("m1", "mine")), Tokens: []string{"mine"}}),
		nil, want{verdict: initlock.VerdictLost, action: initlock.ActionCreate, register: initlock.RegisterClaim, holder: "m1", acquired: true}},
	{"a stale caller whose claim landed: refused, the claim withdrawn",
		lockCall(initlock.Observation{Cluster: cluster(grantTo("m1", "mine")), Tokens: []string{"mine"}, Caller: machine("m1"), CallerLive: recreated("m1")}),
		nil, want{verdict: initlock.VerdictFree, action: initlock.ActionNone, register: initlock.RegisterWithdraw, err: initlock.ErrStaleMachine}},
	{"the register names the caller from an earlier call that never wrote the lock, which initlock handed to another Machine: refused, the grant withdrawn",
		lockCall(initlock.Observation{Lock: handedOver("m2"), Cluster: cluster(grantTo("m1", "t1")), Holder: machine("m2")}),
		nil, want{verdict: initlock.VerdictConflict, action: initlock.ActionNone, register: initlock.RegisterWithdraw, holder: "m2"}},
	{"a grant this call recorded, the lock another Machine's: refused, the grant withdrawn",
		lockCall(initlock.Observation{Lock: upstreamLock("m2", owned), Cluster: cluster(grantTo("m1", "mine")), Holder: machine("m2"), Tokens: []string{"mine"}}),
		nil, want{verdict: initlock.VerdictConflict, action: initlock.ActionNone, register: initlock.RegisterWithdraw, holder: "m2"}},
	{"the caller's own lock from before this call, rewritten by it, the register another's: kept, refused",
		lockCall(initlock.Observation{Lock: lockOf("m1", "mine", owned), Cluster: cluster(grantTo("m2", "t2")), Granted: machine("m2"), Tokens: []string{"mine"}, HeldBefore: true}),
		nil, want{verdict: initlock.VerdictConflict, action: initlock.ActionNone, holder: "m2"}},
	{"a claim of this call whose answer was lost, not in the register: fenced",
		lockCall(initlock.Observation{Lock: upstreamLock("m2", owned), Cluster: cluster(), Holder: machine("m2"), Tokens: []string{"mine"}, ClaimUncertain: true}),
		nil, want{verdict: initlock.VerdictHealthy, action: initlock.ActionNone, register: initlock.RegisterWithdraw, holder: "m2"}},
	{"a claim of this call whose answer was lost, the register another's: left",
		lockCall(initlock.Observation{Lock: upstreamLock("m2", owned), Cluster: cluster(grantTo("m3", "t3")), Holder: machine("m2"), Granted: machine("m3"), Tokens: []string{"mine"}, ClaimUncertain: true}),
		nil, want{verdict: initlock.VerdictConflict, action: initlock.ActionNone, holder: "m3"}},
	{"a grant this call recorded, while a lock write of it may still land: kept",
		lockCall(initlock.Observation{Lock: upstreamLock("m2", owned), Cluster: cluster(grantTo("m1", "mine")), Holder: machine("m2"), Tokens: []string{"mine"}, Uncertain: true}),
		nil, want{verdict: initlock.VerdictConflict, action: initlock.ActionNone, holder: "m2"}},

	// Lock: the caller's own lock.
	{"healthy re-lock: both name the caller exactly with one token: no write",
		lockCall(initlock.Observation{Lock: lockOf("m1", "t1", owned), Cluster: cluster(grantTo("m1", "t1"))}),
		nil, want{verdict: initlock.VerdictHealthy, action: initlock.ActionNone, holder: "m1", acquired: true}},
	{"re-lock of an owned lock whose owner was stripped: adopted",
		lockCall(initlock.Observation{Lock: lockOf("m1", "t1"), Cluster: cluster(grantTo("m1", "t1"))}),
		nil, want{verdict: initlock.VerdictUnowned, action: initlock.ActionAdopt, holder: "m1", acquired: true}},
	{"re-lock with different tokens (a release under way, a late write): both written again",
		lockCall(initlock.Observation{Lock: lockOf("m1", "t1", owned), Cluster: cluster(grantTo("m1", "t2"))}),
		nil, want{verdict: initlock.VerdictHealthy, action: initlock.ActionTakeOver, register: initlock.RegisterClaim, holder: "m1", acquired: true}},
	{"re-lock of a lock without a token (handed over to the caller): both written again",
		lockCall(initlock.Observation{Lock: lockOf("m1", "", owned), Cluster: cluster(grantTo("m1", "t1"))}),
		nil, want{verdict: initlock.VerdictHealthy, action: initlock.ActionTakeOver, register: initlock.RegisterClaim, holder: "m1", acquired: true}},
	{"re-lock with the register emptied: claimed again with the lock",
		lockCall(initlock.Observation{Lock: lockOf("m1", "t1", owned), Cluster: cluster()}),
		nil, want{verdict: initlock.VerdictHealthy, action: initlock.ActionTakeOver, register: initlock.RegisterClaim, holder: "m1", acquired: true}},
	{"lock lost while the caller is granted: claimed again and created",
		lockCall(initlock.Observation{Cluster: cluster(grantTo("m1", "t1"))}),
		nil, want{verdict: initlock.VerdictLost, action: initlock.ActionCreate, register: initlock.RegisterClaim, holder: "m1", acquired: true}},
	{"re-lock after a restore (records by name only): both written again, exactly",
		lockCall(initlock.Observation{Lock: restoredLock("m1", "t1"), Cluster: cluster(restoredGrant("m1", "t1"))}),
		nil, want{verdict: initlock.VerdictUnowned, action: initlock.ActionTakeOver, register: initlock.RegisterClaim, holder: "m1", acquired: true}},
	{"the caller's upstream lock: claimed and rewritten",
		lockCall(initlock.Observation{Lock: upstreamLock("m1", owned), Cluster: cluster()}),
		nil, want{verdict: initlock.VerdictHealthy, action: initlock.ActionTakeOver, register: initlock.RegisterClaim, holder: "m1", acquired: true}},
	{"a Machine created again under the holder's name does not inherit its grant",
		lockCall(initlock.Observation{Lock: lockOf("m1", "t1", owned), Cluster: cluster(grantTo("m1", "t1")), Caller: recreated("m1")}),
		nil, want{verdict: initlock.VerdictStaleHolder, action: initlock.ActionTakeOver, register: initlock.RegisterClaim, holder: "m1", acquired: true}},

	// Lock: nobody holds it.
	{"the lock's holder is gone: taken over",
		lockCall(initlock.Observation{Lock: lockOf("m2", "t2", owned), Cluster: cluster(grantTo("m2", "t2"))}),
		nil, want{verdict: initlock.VerdictStaleHolder, action: initlock.ActionTakeOver, register: initlock.RegisterClaim, holder: "m1", acquired: true}},
	{"the granted Machine was created again: its grant does not count",
		lockCall(initlock.Observation{Cluster: cluster(grantTo("m2", "t2")), Granted: recreated("m2")}),
		nil, want{verdict: initlock.VerdictFree, action: initlock.ActionCreate, register: initlock.RegisterClaim, holder: "m1", acquired: true}},
	{"initialised: grants no longer count and none is written",
		lockCall(initlock.Observation{Cluster: cluster(initialized, grantTo("m2", "t2")), Granted: machine("m2")}),
		nil, want{verdict: initlock.VerdictFree, action: initlock.ActionCreate, holder: "m1", acquired: true}},
	{"initialised, held by another existing Machine: refused",
		lockCall(initlock.Observation{Lock: lockOf("m2", "t2", owned), Cluster: cluster(initialized), Holder: machine("m2")}),
		nil, want{verdict: initlock.VerdictHeldAfterInit, action: initlock.ActionNone, holder: "m2"}},
	{"foreign ConfigMap: refused",
		lockCall(initlock.Observation{Lock: &initlock.Lock{Name: "c1-lock", Problem: initlock.ErrNotALock}, Cluster: cluster()}),
		nil, want{verdict: initlock.VerdictForeign, action: initlock.ActionNone, err: initlock.ErrNotALock, wait: initlock.WaitPerson}},
	{"corrupt lock: refused, and a grant this call recorded withdrawn",
		lockCall(initlock.Observation{Lock: &initlock.Lock{Name: "c1-lock", Problem: initlock.ErrCorruptLock}, Cluster: cluster(grantTo("m1", "mine")), Tokens: []string{"mine"}}),
		nil, want{verdict: initlock.VerdictCorrupt, action: initlock.ActionNone, register: initlock.RegisterWithdraw, err: initlock.ErrCorruptLock, wait: initlock.WaitPerson}},

	// Unlock.
	{"unlock: the grant is retired first",
		unlockCall(machine("m1"), initlock.Observation{Lock: lockOf("m1", "t1", owned), Cluster: cluster(grantTo("m1", "t1"))}),
		nil, want{verdict: initlock.VerdictHealthy, action: initlock.ActionNone, register: initlock.RegisterRetire, holder: "m1"}},
	{"unlock: once retired by this call, withdrawn and the lock deleted",
		unlockCall(machine("m1"), initlock.Observation{Lock: lockOf("m1", "t1", owned), Cluster: cluster(grantTo("m1", "u1")), Tokens: []string{"u1"}}),
		nil, want{verdict: initlock.VerdictHealthy, action: initlock.ActionRelease, register: initlock.RegisterWithdraw, holder: "m1"}},
	{"unlock: a lock alone is deleted",
		unlockCall(machine("m1"), initlock.Observation{Lock: upstreamLock("m1", owned), Cluster: cluster()}),
		nil, want{verdict: initlock.VerdictHealthy, action: initlock.ActionRelease, holder: "m1"}},
	{"unlock by a deleted Machine's object does not release its successor",
		unlockCall(recreated("m1"), initlock.Observation{Lock: lockOf("m1", "t1", owned), Cluster: cluster(grantTo("m1", "t1"))}),
		nil, want{verdict: initlock.VerdictStaleHolder, action: initlock.ActionNone, holder: "m1", err: initlock.ErrNotHolder}},
	{"unlock of another Machine's lock: refused",
		unlockCall(machine("m1"), initlock.Observation{Lock: lockOf("m2", "t2", owned), Cluster: cluster(grantTo("m2", "t2")), Holder: machine("m2"), Granted: machine("m2")}),
		nil, want{verdict: initlock.VerdictHealthy, action: initlock.ActionNone, holder: "m2", err: initlock.ErrNotHolder}},
	{"unlock after a restore matches by name",
		unlockCall(machine("m1"), initlock.Observation{Lock: restoredLock("m1", "t1"), Cluster: cluster()}),
		nil, want{verdict: initlock.VerdictUnowned, action: initlock.ActionRelease, holder: "m1"}},
	{"unlock after init leaves the register, which no longer counts",
		unlockCall(nil, initlock.Observation{Lock: lockOf("m1", "t1", owned), Cluster: cluster(initialized, grantTo("m1", "t1"))}),
		nil, want{verdict: initlock.VerdictHeldAfterInit, action: initlock.ActionRelease, holder: "m1"}},
	{"unlock of any holder: a corrupt lock and a damaged register go together",
		unlockCall(nil, initlock.Observation{Lock: &initlock.Lock{Name: "c1-lock", Problem: initlock.ErrCorruptLock}, Cluster: cluster(damagedGrant)}),
		nil, want{verdict: initlock.VerdictCorrupt, action: initlock.ActionRelease, register: initlock.RegisterWithdraw}},
	{"unlock never touches a foreign ConfigMap",
		unlockCall(nil, initlock.Observation{Lock: &initlock.Lock{Name: "c1-lock", Problem: initlock.ErrNotALock}, Cluster: cluster()}),
		nil, want{verdict: initlock.VerdictForeign, action: initlock.ActionNone, err: initlock.ErrNotALock}},
	{"unlock while paused: nothing",
		unlockCall(machine("m1"), initlock.Observation{Lock: lockOf("m1", "t1", owned), Cluster: cluster(paused, grantTo("m1", "t1"))}),
		nil, want{verdict: initlock.VerdictHealthy, action: initlock.ActionNone, holder: "m1", err: initlock.ErrClusterPaused, wait: initlock.WaitPaused}},
	{"unlock by an object of a Machine restored since: refused as stale, nothing written",
		unlockCall(restoredFrom("m1"), initlock.Observation{Lock: restoredLock("m1", "t1"), Cluster: cluster(restoredGrant("m1", "t1")), CallerLive: machine("m1")}),
		nil, want{verdict: initlock.VerdictUnowned, action: initlock.ActionNone, holder: "m1", err: initlock.ErrStaleMachine}},
	{"unlock by an object whose Machine is gone: refused as stale, nothing written",
		callerGone(unlockCall(machine("m1"), initlock.Observation{Lock: lockOf("m1", "t1", owned), Cluster: cluster(grantTo("m1", "t1"))})),
		nil, want{verdict: initlock.VerdictStaleHolder, action: initlock.ActionNone, holder: "m1", err: initlock.ErrStaleMachine}},
	{"unlock with nothing held: nothing",
		unlockCall(machine("m1"), initlock.Observation{Cluster: cluster(released)}),
		nil, want{verdict: initlock.VerdictFree, action: initlock.ActionNone}},

	// An operator's release.
	{"release: the holder exists and the cluster is not initialised: needs --force",
		operator(initlock.Observation{Lock: lockOf("m1", "t1", owned), Cluster: cluster(grantTo("m1", "t1")), Holder: machine("m1"), Granted: machine("m1")}),
		nil, want{verdict: initlock.VerdictHealthy, action: initlock.ActionNone, register: initlock.RegisterRetire, holder: "m1", force: true}},
	{"release: the holder is gone: no --force",
		operator(initlock.Observation{Lock: lockOf("m1", "t1", owned), Cluster: cluster(grantTo("m1", "t1"))}),
		nil, want{verdict: initlock.VerdictStaleHolder, action: initlock.ActionNone, register: initlock.RegisterRetire, holder: "m1"}},
	{"release: initialised: no --force, the register is left",
		operator(initlock.Observation{Lock: lockOf("m1", "t1", owned), Cluster: cluster(initialized, grantTo("m1", "t1")), Holder: machine("m1")}),
		nil, want{verdict: initlock.VerdictHeldAfterInit, action: initlock.ActionRelease, holder: "m1"}},
	{"release: lost lock of an existing granted Machine: needs --force",
		operator(initlock.Observation{Cluster: cluster(grantTo("m1", "t1")), Granted: machine("m1")}),
		nil, want{verdict: initlock.VerdictLost, action: initlock.ActionNone, register: initlock.RegisterRetire, holder: "m1", force: true}},
	{"release: corrupt lock of an uninitialised cluster: needs --force",
		operator(initlock.Observation{Lock: &initlock.Lock{Name: "c1-lock", Problem: initlock.ErrCorruptLock}, Cluster: cluster()}),
		nil, want{verdict: initlock.VerdictCorrupt, action: initlock.ActionRelease, force: true}},
	{"release: cluster missing while the holder exists: needs --force",
		operator(initlock.Observation{Lock: lockOf("m1", "t1"), Holder: machine("m1")}),
		nil, want{verdict: initlock.VerdictOrphan, action: initlock.ActionRelease, holder: "m1", force: true}},

	// Keepers (the manager and kubectl initlock repair).
	{"keeper: healthy lock, nothing to do",
		initlock.Observation{Lock: protected(lockOf("m1", "t1", owned)), Cluster: cluster(grantTo("m1", "t1")), Holder: machine("m1"), Granted: machine("m1")},
		nil, want{verdict: initlock.VerdictHealthy, action: initlock.ActionNone, holder: "m1"}},
	{"keeper: a held lock is protected with the finalizer",
		initlock.Observation{Lock: lockOf("m1", "t1", owned), Cluster: cluster(grantTo("m1", "t1")), Holder: machine("m1"), Granted: machine("m1")},
		nil, want{verdict: initlock.VerdictHealthy, action: initlock.ActionProtect, holder: "m1"}},
	{"keeper: a restored held lock without owner is protected and adopted, in one patch",
		initlock.Observation{Lock: upstreamLock("m1"), Cluster: cluster(), Holder: machine("m1")},
		nil, want{verdict: initlock.VerdictUnowned, action: initlock.ActionProtect, holder: "m1"}},
	{"keeper: protection off: adopted only",
		initlock.Observation{Lock: upstreamLock("m1"), Cluster: cluster(), Holder: machine("m1")},
		&initlock.Policy{ReleaseAfterInit: true, OrphanGrace: time.Minute}, want{verdict: initlock.VerdictUnowned, action: initlock.ActionAdopt, holder: "m1"}},
	{"keeper: a lock naming a gone Machine is not protected",
		initlock.Observation{Lock: upstreamLock("m9", owned), Cluster: cluster()},
		nil, want{verdict: initlock.VerdictStaleHolder, action: initlock.ActionNone, holder: "m9", wait: initlock.WaitTakeOver}},
	{"keeper: a protected lock after init: the finalizer goes first",
		initlock.Observation{Lock: protected(lockOf("m1", "t1", owned)), Cluster: cluster(initialized), Holder: machine("m1")},
		nil, want{verdict: initlock.VerdictHeldAfterInit, action: initlock.ActionUnprotect, holder: "m1"}},
	{"keeper: deleted while its holder may run init: held",
		initlock.Observation{Lock: beingDeleted(protected(upstreamLock("m1", owned))), Cluster: cluster(), Holder: machine("m1"), HolderBootstrap: &initlock.Bootstrap{}},
		nil, want{verdict: initlock.VerdictHealthy, action: initlock.ActionNone, holder: "m1", wait: initlock.WaitHeld, requeue: 30 * time.Second}},
	{"keeper: deleted, its holder gone: let go",
		initlock.Observation{Lock: beingDeleted(protected(upstreamLock("m1", owned))), Cluster: cluster()},
		nil, want{verdict: initlock.VerdictStaleHolder, action: initlock.ActionUnprotect, holder: "m1"}},
	{"keeper: deleted with its Cluster: let go",
		initlock.Observation{Lock: beingDeleted(protected(upstreamLock("m1", owned))), Cluster: cluster(deleting), Holder: machine("m1")},
		nil, want{verdict: initlock.VerdictHealthy, action: initlock.ActionUnprotect, holder: "m1"}},
	{"keeper: deleted after init: let go",
		initlock.Observation{Lock: beingDeleted(protected(upstreamLock("m1", owned))), Cluster: cluster(initialized), Holder: machine("m1")},
		nil, want{verdict: initlock.VerdictHeldAfterInit, action: initlock.ActionUnprotect, holder: "m1"}},
	{"keeper: deleted, not protected: nothing",
		initlock.Observation{Lock: beingDeleted(upstreamLock("m1", owned)), Cluster: cluster(), Holder: machine("m1")},
		nil, want{verdict: initlock.VerdictHealthy, action: initlock.ActionNone, holder: "m1"}},
	{"keeper: deleted by its provider after its bootstrap failed, no data: disarmed",
		initlock.Observation{Lock: beingDeleted(protected(upstreamLock("m1", owned))), Cluster: cluster(), Holder: machine("m1"), HolderBootstrap: &initlock.Bootstrap{Failed: true}},
		nil, want{verdict: initlock.VerdictHealthy, action: initlock.ActionDisarm, holder: "m1"}},
	{"keeper: deleted, its bootstrap failed but it has data: held",
		initlock.Observation{Lock: beingDeleted(protected(upstreamLock("m1", owned))), Cluster: cluster(), Holder: machine("m1"), HolderBootstrap: &initlock.Bootstrap{Failed: true, DataSecretName: "m1"}},
		nil, want{verdict: initlock.VerdictHealthy, action: initlock.ActionNone, holder: "m1", wait: initlock.WaitHeld, requeue: 30 * time.Second}},
	{"keeper: disarmed, within the settle time: waits",
		initlock.Observation{Lock: disarmed(beingDeleted(protected(upstreamLock("m1", owned))), "m1", t0.Add(-time.Minute)), Cluster: cluster(), Holder: machine("m1"), HolderBootstrap: &initlock.Bootstrap{Failed: true}},
		nil, want{verdict: initlock.VerdictStaleHolder, action: initlock.ActionNone, holder: initlock.DisarmedHolder, wait: initlock.WaitDisarmed, requeue: time.Minute}},
	{"keeper: disarmed past the settle time, still no data: let go",
		initlock.Observation{Lock: disarmed(beingDeleted(protected(upstreamLock("m1", owned))), "m1", t0.Add(-3*time.Minute)), Cluster: cluster(), Holder: machine("m1"), HolderBootstrap: &initlock.Bootstrap{Failed: true}},
		nil, want{verdict: initlock.VerdictStaleHolder, action: initlock.ActionUnprotect, holder: initlock.DisarmedHolder}},
	{"keeper: disarmed, the holder got its data meanwhile: given back",
		initlock.Observation{Lock: disarmed(beingDeleted(protected(upstreamLock("m1", owned))), "m1", t0.Add(-3*time.Minute)), Cluster: cluster(), Holder: machine("m1"), HolderBootstrap: &initlock.Bootstrap{DataSecretName: "m1"}},
		nil, want{verdict: initlock.VerdictStaleHolder, action: initlock.ActionRearm, holder: initlock.DisarmedHolder}},
	{"keeper: restored lock without owner is adopted",
		initlock.Observation{Lock: protected(upstreamLock("m1")), Cluster: cluster(), Holder: machine("m1")},
		nil, want{verdict: initlock.VerdictUnowned, action: initlock.ActionAdopt, holder: "m1"}},
	{"keeper: owner pointing at another cluster is replaced",
		initlock.Observation{Lock: protected(upstreamLock("m1", ownerRef("c9", "c9-uid"))), Cluster: cluster(), Holder: machine("m1")},
		nil, want{verdict: initlock.VerdictUnowned, action: initlock.ActionAdopt, holder: "m1"}},
	{"keeper: two owner refs to the cluster are reduced to one",
		initlock.Observation{Lock: protected(upstreamLock("m1", owned, owned)), Cluster: cluster(), Holder: machine("m1")},
		nil, want{verdict: initlock.VerdictUnowned, action: initlock.ActionAdopt, holder: "m1"}},
	{"keeper: paused cluster is left alone",
		initlock.Observation{Lock: upstreamLock("m1"), Cluster: cluster(paused), Holder: machine("m1")},
		nil, want{verdict: initlock.VerdictUnowned, action: initlock.ActionNone, holder: "m1", err: initlock.ErrClusterPaused, wait: initlock.WaitPaused}},
	{"keeper: initialised cluster, lock released",
		initlock.Observation{Lock: upstreamLock("m1", owned), Cluster: cluster(initialized), Holder: machine("m1")},
		nil, want{verdict: initlock.VerdictHeldAfterInit, action: initlock.ActionRelease, holder: "m1"}},
	{"keeper: initialised cluster, release disabled, unowned lock adopted",
		initlock.Observation{Lock: upstreamLock("m1"), Cluster: cluster(initialized), Holder: machine("m1")},
		&initlock.Policy{OrphanGrace: time.Minute}, want{verdict: initlock.VerdictHeldAfterInit, action: initlock.ActionAdopt, holder: "m1"}},
	{"keeper: stale holder is left for the next Lock to take over",
		initlock.Observation{Lock: upstreamLock("m1", owned), Cluster: cluster()},
		nil, want{verdict: initlock.VerdictStaleHolder, action: initlock.ActionNone, holder: "m1", wait: initlock.WaitTakeOver}},
	{"keeper: a conflict is left to a person",
		initlock.Observation{Lock: protected(lockOf("m1", "t1", owned)), Cluster: cluster(grantTo("m2", "t2")), Holder: machine("m1"), Granted: machine("m2")},
		nil, want{verdict: initlock.VerdictConflict, action: initlock.ActionNone, holder: "m2", wait: initlock.WaitPerson}},
	{"keeper: a damaged register is left to a person",
		initlock.Observation{Lock: lockOf("m1", "t1", owned), Cluster: cluster(damagedGrant), Holder: machine("m1")},
		nil, want{verdict: initlock.VerdictCorrupt, action: initlock.ActionNone, holder: "m1", err: initlock.ErrCorruptLock, wait: initlock.WaitPerson}},
	{"keeper: deleting cluster with unowned lock: released",
		initlock.Observation{Lock: upstreamLock("m1"), Cluster: cluster(deleting), Holder: machine("m1")},
		nil, want{verdict: initlock.VerdictUnowned, action: initlock.ActionRelease, holder: "m1"}},
	{"keeper: deleting cluster with owned lock: left to the garbage collector",
		initlock.Observation{Lock: upstreamLock("m1", owned), Cluster: cluster(deleting), Holder: machine("m1")},
		nil, want{verdict: initlock.VerdictHealthy, action: initlock.ActionNone, holder: "m1"}},
	{"keeper: orphan without mark is marked",
		initlock.Observation{Lock: upstreamLock("m1", ownerRef("c1", "old-uid"))},
		nil, want{verdict: initlock.VerdictOrphan, action: initlock.ActionMarkOrphan, holder: "m1", requeue: 10 * time.Minute}},
	{"keeper: orphan within grace waits",
		initlock.Observation{Lock: withMark(upstreamLock("m1"), t0.Add(-4*time.Minute))},
		nil, want{verdict: initlock.VerdictOrphan, action: initlock.ActionNone, holder: "m1", requeue: 6 * time.Minute, wait: initlock.WaitGrace}},
	{"keeper: orphan past grace with holder gone is collected",
		initlock.Observation{Lock: withMark(upstreamLock("m1"), t0.Add(-10*time.Minute))},
		nil, want{verdict: initlock.VerdictOrphan, action: initlock.ActionCollect, holder: "m1"}},
	{"keeper: orphan past grace whose holder exists is kept",
		initlock.Observation{Lock: withMark(upstreamLock("m1"), t0.Add(-time.Hour)), Holder: machine("m1")},
		nil, want{verdict: initlock.VerdictOrphan, action: initlock.ActionNone, holder: "m1", requeue: 10 * time.Minute, wait: initlock.WaitHolder}},
	{"keeper: cluster back after a mark: adopted, which drops the mark",
		initlock.Observation{Lock: withMark(protected(upstreamLock("m1", owned)), t0), Cluster: cluster(), Holder: machine("m1")},
		nil, want{verdict: initlock.VerdictHealthy, action: initlock.ActionAdopt, holder: "m1"}},
	{"keeper: foreign ConfigMap is never touched",
		initlock.Observation{Lock: &initlock.Lock{Name: "c1-lock", Problem: initlock.ErrNotALock}, Cluster: cluster(initialized)},
		nil, want{verdict: initlock.VerdictForeign, action: initlock.ActionNone, err: initlock.ErrNotALock, wait: initlock.WaitPerson}},
	{"keeper: corrupt lock is left for a person",
		initlock.Observation{Lock: &initlock.Lock{Name: "c1-lock", Problem: initlock.ErrCorruptLock}, Cluster: cluster(initialized)},
		nil, want{verdict: initlock.VerdictCorrupt, action: initlock.ActionNone, err: initlock.ErrCorruptLock, wait: initlock.WaitPerson}},
	{"keeper: no lock and no grant is free",
		initlock.Observation{Cluster: cluster()},
		nil, want{verdict: initlock.VerdictFree, action: initlock.ActionNone}},
	{"keeper: no lock but a grant is lost; keepers do not recreate",
		initlock.Observation{Cluster: cluster(grantTo("m1", "t1")), Granted: machine("m1")},
		nil, want{verdict: initlock.VerdictLost, action: initlock.ActionNone, holder: "m1", wait: initlock.WaitLockRecreated}},
	{"keeper: no lock and a grant to a Machine that is gone is free",
		initlock.Observation{Cluster: cluster(grantTo("m1", "t1"))},
		nil, want{verdict: initlock.VerdictFree, action: initlock.ActionNone}},
}

func TestDecide(t *testing.T) {
	for _, tt := range decideRows {
		t.Run(tt.name, func(t *testing.T) {
			p := initlock.DefaultPolicy
			if tt.policy != nil {
				p = *tt.policy
			}
			tt.obs.ClusterName = "c1"
			d := initlock.Decide(tt.obs, p, t0)
			w := tt.want
			if d.Verdict != w.verdict || d.Action != w.action || d.Register != w.register || d.Holder != w.holder ||
				d.Acquired != w.acquired || d.Wait != w.wait || d.NeedsForce != w.force || d.RequeueAfter != w.requeue {
				t.Errorf("Decide() = %+v\nwant %+v", d, w)
			}
			if (w.err == nil) != (d.Err == nil) || (w.err != nil && !errors.Is(d.Err, w.err)) {
				t.Errorf("Decide().Err = %v, want %v", d.Err, w.err)
			}
		})
	}
}

func ptr[T any](v T) *T { return &v }
