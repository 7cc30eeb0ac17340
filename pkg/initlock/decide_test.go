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

// lockOf builds an observed, valid lock of cluster c1 held by holder.
func lockOf(holder string, owners ...metav1.OwnerReference) *initlock.Lock {
	return &initlock.Lock{
		Namespace: "ns", Name: "c1-lock", UID: "lock-uid", ResourceVersion: "7",
		Record:          initlock.Record{MachineName: holder, MachineUID: types.UID(holder + "-uid")},
		OwnerReferences: owners,
	}
}

func ownerRef(name string, uid types.UID) metav1.OwnerReference {
	return metav1.OwnerReference{APIVersion: "cluster.x-k8s.io/v1beta2", Kind: "Cluster", Name: name, UID: uid}
}

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

// grantTo fills the Cluster's grant register with a grant to machine.
func grantTo(name string) func(*initlock.Cluster) {
	return func(c *initlock.Cluster) {
		c.Grant = initlock.GrantFrom(map[string]string{initlock.GrantAnnotation: `{"machineName":"` + name + `"}`})
	}
}

// grantToUID fills the register with a grant to machine name of UID uid,
// recorded while the Cluster had UID clusterUID.
func grantToUID(name, uid, clusterUID string) func(*initlock.Cluster) {
	return func(c *initlock.Cluster) {
		c.Grant = initlock.GrantFrom(map[string]string{initlock.GrantAnnotation: `{"machineName":"` + name + `","machineUID":"` + uid + `","clusterUID":"` + clusterUID + `"}`})
	}
}

// damagedGrant fills the register with something that is not a grant.
func damagedGrant(c *initlock.Cluster) {
	c.Grant = initlock.GrantFrom(map[string]string{initlock.GrantAnnotation: "not json"})
}

var (
	paused      = func(c *initlock.Cluster) { c.Paused = true }
	initialized = func(c *initlock.Cluster) { c.Initialized = true }
	deleting    = func(c *initlock.Cluster) { c.Deleting = true }
)

// byInitlock marks a lock as written by initlock's Lock, which records
// the acquisition time.
func byInitlock(l *initlock.Lock) *initlock.Lock {
	l.Record.AcquiredAt = &t0
	return l
}

func handedOver(l *initlock.Lock, by string) *initlock.Lock {
	l.Record.HandedOverBy = by
	return l
}

func withMark(l *initlock.Lock, since time.Time) *initlock.Lock {
	l.ClusterAbsentSince = &since
	return l
}

func TestDecide(t *testing.T) {
	policy := initlock.DefaultPolicy
	owned := ownerRef("c1", "c1-uid")
	tests := []struct {
		name    string
		obs     initlock.Observation
		policy  *initlock.Policy
		verdict initlock.Verdict
		owner   initlock.OwnerState
		action  initlock.Action
		holder  string
		granted bool
		claim   bool
		err     error
		requeue time.Duration
	}{
		// Callers (Lock).
		{name: "free lock is created for the caller, which claims the register",
			obs:     initlock.Observation{Cluster: cluster(), Caller: machine("m1")},
			verdict: initlock.VerdictFree, action: initlock.ActionCreate, holder: "m1", granted: true, claim: true},
		{name: "paused cluster: nothing, even when free",
			obs:     initlock.Observation{Cluster: cluster(paused), Caller: machine("m1")},
			verdict: initlock.VerdictFree, action: initlock.ActionNone, err: initlock.ErrClusterPaused},
		{name: "lost lock is recreated for the granted holder, caller refused",
			obs:     initlock.Observation{Cluster: cluster(grantTo("m1")), Granted: machine("m1"), Caller: machine("m2")},
			verdict: initlock.VerdictLost, action: initlock.ActionRecreate, holder: "m1"},
		{name: "lost lock of the caller itself is created for it, no claim needed",
			obs:     initlock.Observation{Cluster: cluster(grantTo("m1")), Caller: machine("m1")},
			verdict: initlock.VerdictLost, action: initlock.ActionCreate, holder: "m1", granted: true},
		{name: "no lock and a grant to a machine that is gone: free, the caller claims over it",
			obs:     initlock.Observation{Cluster: cluster(grantTo("m1")), Caller: machine("m2")},
			verdict: initlock.VerdictFree, action: initlock.ActionCreate, holder: "m2", granted: true, claim: true},
		{name: "a machine created again under the holder's name does not inherit its grant",
			obs:     initlock.Observation{Cluster: cluster(grantToUID("m1", "old-m1-uid", "c1-uid")), Caller: machine("m1")},
			verdict: initlock.VerdictFree, action: initlock.ActionCreate, holder: "m1", granted: true, claim: true},
		{name: "another machine created again under the holder's name: the grant does not count",
			obs:     initlock.Observation{Cluster: cluster(grantToUID("m1", "old-m1-uid", "c1-uid")), Granted: machine("m1"), Caller: machine("m2")},
			verdict: initlock.VerdictFree, action: initlock.ActionCreate, holder: "m2", granted: true, claim: true},
		{name: "after a restore (new Cluster UID) the grant names its machine by name",
			obs:     initlock.Observation{Cluster: cluster(grantToUID("m1", "old-m1-uid", "old-c1-uid")), Granted: machine("m1"), Caller: machine("m2")},
			verdict: initlock.VerdictLost, action: initlock.ActionRecreate, holder: "m1"},
		{name: "grants do not count once the cluster is initialised, and none is recorded",
			obs:     initlock.Observation{Cluster: cluster(initialized, grantTo("m1")), Granted: machine("m1"), Caller: machine("m2")},
			verdict: initlock.VerdictFree, action: initlock.ActionCreate, holder: "m2", granted: true},
		{name: "damaged register, no lock: refused with ErrCorruptLock",
			obs:     initlock.Observation{Cluster: cluster(damagedGrant), Caller: machine("m1")},
			verdict: initlock.VerdictLost, action: initlock.ActionNone, err: initlock.ErrCorruptLock},
		{name: "damaged register, held lock: refused with ErrCorruptLock, even for the holder",
			obs:     initlock.Observation{Lock: lockOf("m1", owned), Cluster: cluster(damagedGrant), Holder: machine("m1"), Caller: machine("m1")},
			verdict: initlock.VerdictHealthy, owner: initlock.OwnerOK, action: initlock.ActionNone, holder: "m1", err: initlock.ErrCorruptLock},
		{name: "healthy re-lock by the holder: no write",
			obs:     initlock.Observation{Lock: lockOf("m1", owned), Cluster: cluster(grantTo("m1")), Holder: machine("m1"), Caller: machine("m1")},
			verdict: initlock.VerdictHealthy, owner: initlock.OwnerOK, action: initlock.ActionNone, holder: "m1", granted: true},
		{name: "re-lock of a lock written before the register existed: the holder claims it",
			obs:     initlock.Observation{Lock: lockOf("m1", owned), Cluster: cluster(), Holder: machine("m1"), Caller: machine("m1")},
			verdict: initlock.VerdictHealthy, owner: initlock.OwnerOK, action: initlock.ActionNone, holder: "m1", granted: true, claim: true},
		{name: "re-lock after restore: stale owner UID is re-adopted",
			obs:     initlock.Observation{Lock: lockOf("m1", ownerRef("c1", "old-uid")), Cluster: cluster(grantTo("m1")), Holder: machine("m1"), Caller: machine("m1")},
			verdict: initlock.VerdictUnowned, owner: initlock.OwnerStaleUID, action: initlock.ActionAdopt, holder: "m1", granted: true},
		{name: "re-lock with no owner is re-adopted",
			obs:     initlock.Observation{Lock: lockOf("m1"), Cluster: cluster(grantTo("m1")), Holder: machine("m1"), Caller: machine("m1")},
			verdict: initlock.VerdictUnowned, owner: initlock.OwnerMissing, action: initlock.ActionAdopt, holder: "m1", granted: true},
		{name: "re-lock refreshes a stale machine UID",
			obs: initlock.Observation{Lock: lockOf("m1", owned), Cluster: cluster(grantTo("m1")), Holder: machine("m1"),
				Caller: &initlock.Machine{Namespace: "ns", Name: "m1", UID: "new-uid"}},
			verdict: initlock.VerdictHealthy, owner: initlock.OwnerOK, action: initlock.ActionAdopt, holder: "m1", granted: true},
		{name: "re-lock of a lock handed over by another caller makes it the holder's own",
			obs:     initlock.Observation{Lock: handedOver(lockOf("m1", owned), "m2"), Cluster: cluster(grantTo("m1")), Holder: machine("m1"), Caller: machine("m1")},
			verdict: initlock.VerdictHealthy, owner: initlock.OwnerOK, action: initlock.ActionAdopt, holder: "m1", granted: true},
		{name: "held by another existing machine without a grant (upstream lock): refused",
			obs:     initlock.Observation{Lock: lockOf("m1", owned), Cluster: cluster(), Holder: machine("m1"), Caller: machine("m2")},
			verdict: initlock.VerdictHealthy, owner: initlock.OwnerOK, action: initlock.ActionNone, holder: "m1"},
		{name: "held by the granted machine: refused",
			obs:     initlock.Observation{Lock: lockOf("m1", owned), Cluster: cluster(grantTo("m1")), Holder: machine("m1"), Granted: machine("m1"), Caller: machine("m2")},
			verdict: initlock.VerdictHealthy, owner: initlock.OwnerOK, action: initlock.ActionNone, holder: "m1"},
		{name: "held by a machine that is gone: taken over, register claimed",
			obs:     initlock.Observation{Lock: lockOf("m1", owned), Cluster: cluster(grantTo("m1")), Caller: machine("m2")},
			verdict: initlock.VerdictStaleHolder, owner: initlock.OwnerOK, action: initlock.ActionTakeOver, holder: "m2", granted: true, claim: true},
		{name: "caller wrote the lock but the register names another machine: yield to it",
			obs:     initlock.Observation{Lock: byInitlock(lockOf("m2", owned)), Cluster: cluster(grantTo("m1")), Holder: machine("m2"), Granted: machine("m1"), Caller: machine("m2")},
			verdict: initlock.VerdictHealthy, owner: initlock.OwnerOK, action: initlock.ActionYield, holder: "m1"},
		{name: "lock of a third machine while the register names another: handed to the granted one",
			obs:     initlock.Observation{Lock: byInitlock(lockOf("m3", owned)), Cluster: cluster(grantTo("m1")), Holder: machine("m3"), Granted: machine("m1"), Caller: machine("m2")},
			verdict: initlock.VerdictHealthy, owner: initlock.OwnerOK, action: initlock.ActionYield, holder: "m1"},
		{name: "the register names the caller, but an upstream lock of another existing machine stands: refused",
			obs:     initlock.Observation{Lock: lockOf("m2", owned), Cluster: cluster(grantTo("m1")), Holder: machine("m2"), Caller: machine("m1")},
			verdict: initlock.VerdictHealthy, owner: initlock.OwnerOK, action: initlock.ActionNone, holder: "m2"},
		{name: "the register names a third machine, but an upstream lock of another existing machine stands: refused",
			obs:     initlock.Observation{Lock: lockOf("m2", owned), Cluster: cluster(grantTo("m3")), Holder: machine("m2"), Granted: machine("m3"), Caller: machine("m1")},
			verdict: initlock.VerdictHealthy, owner: initlock.OwnerOK, action: initlock.ActionNone, holder: "m2"},
		{name: "holder of an upstream lock keeps it whatever the register says, and claims the register",
			obs:     initlock.Observation{Lock: lockOf("m1", owned), Cluster: cluster(grantTo("m2")), Holder: machine("m1"), Granted: machine("m2"), Caller: machine("m1")},
			verdict: initlock.VerdictHealthy, owner: initlock.OwnerOK, action: initlock.ActionNone, holder: "m1", granted: true, claim: true},
		{name: "the register names the caller: it takes over a lock of a racer that lost the register",
			obs:     initlock.Observation{Lock: byInitlock(lockOf("m2", owned)), Cluster: cluster(grantTo("m1")), Holder: machine("m2"), Caller: machine("m1")},
			verdict: initlock.VerdictHealthy, owner: initlock.OwnerOK, action: initlock.ActionTakeOver, holder: "m1", granted: true},
		{name: "register empty, lock written by initlock for an existing machine: claimed and taken over",
			obs:     initlock.Observation{Lock: byInitlock(lockOf("m2", owned)), Cluster: cluster(), Holder: machine("m2"), Caller: machine("m1")},
			verdict: initlock.VerdictHealthy, owner: initlock.OwnerOK, action: initlock.ActionTakeOver, holder: "m1", granted: true, claim: true},
		{name: "initialised cluster, lock written by initlock for an existing machine: refused",
			obs:     initlock.Observation{Lock: byInitlock(lockOf("m2", owned)), Cluster: cluster(initialized), Holder: machine("m2"), Caller: machine("m1")},
			verdict: initlock.VerdictHeldAfterInit, owner: initlock.OwnerOK, action: initlock.ActionNone, holder: "m2"},
		{name: "the register names the caller and the lock's holder is gone: taken over",
			obs:     initlock.Observation{Lock: lockOf("m2", owned), Cluster: cluster(grantTo("m1")), Caller: machine("m1")},
			verdict: initlock.VerdictStaleHolder, owner: initlock.OwnerOK, action: initlock.ActionTakeOver, holder: "m1", granted: true},
		{name: "foreign configmap: refused with ErrNotALock",
			obs:     initlock.Observation{Lock: &initlock.Lock{Name: "c1-lock", Problem: initlock.ErrNotALock}, Cluster: cluster(), Caller: machine("m1")},
			verdict: initlock.VerdictForeign, action: initlock.ActionNone, err: initlock.ErrNotALock},
		{name: "corrupt lock: refused with ErrCorruptLock",
			obs:     initlock.Observation{Lock: &initlock.Lock{Name: "c1-lock", Problem: initlock.ErrCorruptLock}, Cluster: cluster(), Caller: machine("m1")},
			verdict: initlock.VerdictCorrupt, action: initlock.ActionNone, err: initlock.ErrCorruptLock},
		{name: "paused cluster with a stale holder: nothing",
			obs:     initlock.Observation{Lock: lockOf("m1"), Cluster: cluster(paused), Caller: machine("m2")},
			verdict: initlock.VerdictStaleHolder, owner: initlock.OwnerMissing, action: initlock.ActionNone, holder: "m1", err: initlock.ErrClusterPaused},

		// Keepers (manager and CLI).
		{name: "keeper: healthy lock, nothing to do",
			obs:     initlock.Observation{Lock: lockOf("m1", owned), Cluster: cluster(), Holder: machine("m1")},
			verdict: initlock.VerdictHealthy, owner: initlock.OwnerOK, action: initlock.ActionNone, holder: "m1"},
		{name: "keeper: restored lock without owner is adopted",
			obs:     initlock.Observation{Lock: lockOf("m1"), Cluster: cluster(), Holder: machine("m1")},
			verdict: initlock.VerdictUnowned, owner: initlock.OwnerMissing, action: initlock.ActionAdopt, holder: "m1"},
		{name: "keeper: owner pointing at another cluster is replaced",
			obs:     initlock.Observation{Lock: lockOf("m1", ownerRef("c9", "c9-uid")), Cluster: cluster(), Holder: machine("m1")},
			verdict: initlock.VerdictUnowned, owner: initlock.OwnerWrongCluster, action: initlock.ActionAdopt, holder: "m1"},
		{name: "keeper: two owner refs to the cluster are reduced to one",
			obs:     initlock.Observation{Lock: lockOf("m1", owned, owned), Cluster: cluster(), Holder: machine("m1")},
			verdict: initlock.VerdictUnowned, owner: initlock.OwnerStaleUID, action: initlock.ActionAdopt, holder: "m1"},
		{name: "keeper: paused cluster is left alone",
			obs:     initlock.Observation{Lock: lockOf("m1"), Cluster: cluster(paused), Holder: machine("m1")},
			verdict: initlock.VerdictUnowned, owner: initlock.OwnerMissing, action: initlock.ActionNone, holder: "m1", err: initlock.ErrClusterPaused},
		{name: "keeper: initialised cluster, lock released",
			obs:     initlock.Observation{Lock: lockOf("m1", owned), Cluster: cluster(initialized), Holder: machine("m1")},
			verdict: initlock.VerdictHeldAfterInit, owner: initlock.OwnerOK, action: initlock.ActionRelease, holder: "m1"},
		{name: "keeper: initialised cluster, release disabled, unowned lock adopted",
			obs:    initlock.Observation{Lock: lockOf("m1"), Cluster: cluster(initialized), Holder: machine("m1")},
			policy: &initlock.Policy{OrphanGrace: time.Minute}, verdict: initlock.VerdictHeldAfterInit, owner: initlock.OwnerMissing,
			action: initlock.ActionAdopt, holder: "m1"},
		{name: "keeper: initialised cluster, release disabled, healthy",
			obs:    initlock.Observation{Lock: lockOf("m1", owned), Cluster: cluster(initialized), Holder: machine("m1")},
			policy: &initlock.Policy{OrphanGrace: time.Minute}, verdict: initlock.VerdictHeldAfterInit, owner: initlock.OwnerOK,
			action: initlock.ActionNone, holder: "m1"},
		{name: "keeper: stale holder is left for the next Lock to take over",
			obs:     initlock.Observation{Lock: lockOf("m1", owned), Cluster: cluster()},
			verdict: initlock.VerdictStaleHolder, owner: initlock.OwnerOK, action: initlock.ActionNone, holder: "m1"},
		{name: "keeper: deleting cluster with unowned lock: released",
			obs:     initlock.Observation{Lock: lockOf("m1"), Cluster: cluster(deleting), Holder: machine("m1")},
			verdict: initlock.VerdictUnowned, owner: initlock.OwnerMissing, action: initlock.ActionRelease, holder: "m1"},
		{name: "keeper: deleting cluster with owned lock: left to the garbage collector",
			obs:     initlock.Observation{Lock: lockOf("m1", owned), Cluster: cluster(deleting), Holder: machine("m1")},
			verdict: initlock.VerdictHealthy, owner: initlock.OwnerOK, action: initlock.ActionNone, holder: "m1"},
		{name: "keeper: orphan without mark is marked",
			obs:     initlock.Observation{Lock: lockOf("m1", ownerRef("c1", "old-uid"))},
			verdict: initlock.VerdictOrphan, owner: initlock.OwnerStaleUID, action: initlock.ActionMarkOrphan, holder: "m1", requeue: 10 * time.Minute},
		{name: "keeper: orphan within grace waits",
			obs:     initlock.Observation{Lock: withMark(lockOf("m1"), t0.Add(-4*time.Minute))},
			verdict: initlock.VerdictOrphan, owner: initlock.OwnerMissing, action: initlock.ActionNone, holder: "m1", requeue: 6 * time.Minute},
		{name: "keeper: orphan past grace with holder gone is collected",
			obs:     initlock.Observation{Lock: withMark(lockOf("m1"), t0.Add(-10*time.Minute))},
			verdict: initlock.VerdictOrphan, owner: initlock.OwnerMissing, action: initlock.ActionCollect, holder: "m1"},
		{name: "keeper: orphan past grace whose holder exists is kept",
			obs:     initlock.Observation{Lock: withMark(lockOf("m1"), t0.Add(-time.Hour)), Holder: machine("m1")},
			verdict: initlock.VerdictOrphan, owner: initlock.OwnerMissing, action: initlock.ActionNone, holder: "m1", requeue: 10 * time.Minute},
		{name: "keeper: cluster back after a mark: adopted, which drops the mark",
			obs:     initlock.Observation{Lock: withMark(lockOf("m1", owned), t0), Cluster: cluster(), Holder: machine("m1")},
			verdict: initlock.VerdictHealthy, owner: initlock.OwnerOK, action: initlock.ActionAdopt, holder: "m1"},
		{name: "keeper: foreign configmap is never touched",
			obs:     initlock.Observation{Lock: &initlock.Lock{Name: "c1-lock", Problem: initlock.ErrNotALock}, Cluster: cluster(initialized)},
			verdict: initlock.VerdictForeign, action: initlock.ActionNone, err: initlock.ErrNotALock},
		{name: "keeper: corrupt lock is left for a human",
			obs:     initlock.Observation{Lock: &initlock.Lock{Name: "c1-lock", Problem: initlock.ErrCorruptLock}, Cluster: cluster(initialized)},
			verdict: initlock.VerdictCorrupt, action: initlock.ActionNone, err: initlock.ErrCorruptLock},
		{name: "keeper: no lock and no grant is free",
			obs:     initlock.Observation{Cluster: cluster()},
			verdict: initlock.VerdictFree, action: initlock.ActionNone},
		{name: "keeper: no lock but a grant is lost; keepers do not recreate",
			obs:     initlock.Observation{Cluster: cluster(grantTo("m1")), Granted: machine("m1")},
			verdict: initlock.VerdictLost, action: initlock.ActionNone, holder: "m1"},
		{name: "keeper: no lock and a grant to a machine that is gone is free",
			obs:     initlock.Observation{Cluster: cluster(grantTo("m1"))},
			verdict: initlock.VerdictFree, action: initlock.ActionNone},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := policy
			if tt.policy != nil {
				p = *tt.policy
			}
			tt.obs.ClusterName = "c1"
			d := initlock.Decide(tt.obs, p, t0)
			if d.Verdict != tt.verdict || d.Owner != tt.owner || d.Action != tt.action || d.Holder != tt.holder || d.Acquired != tt.granted || d.Claim != tt.claim {
				t.Errorf("Decide() = %+v\nwant verdict=%s owner=%s action=%s holder=%s acquired=%v claim=%v", d, tt.verdict, tt.owner, tt.action, tt.holder, tt.granted, tt.claim)
			}
			if (tt.err == nil) != (d.Err == nil) || (tt.err != nil && !errors.Is(d.Err, tt.err)) {
				t.Errorf("Decide().Err = %v, want %v", d.Err, tt.err)
			}
			if d.RequeueAfter != tt.requeue {
				t.Errorf("Decide().RequeueAfter = %s, want %s", d.RequeueAfter, tt.requeue)
			}
		})
	}
}

// TestDecideNeverDeletesAHeldLockOfAnUninitialisedCluster walks every
// combination of facts and checks the central safety property of keepers: a
// lock whose holder exists on an uninitialised, undeleted cluster is never
// released or collected.
func TestDecideNeverDeletesAHeldLockOfAnUninitialisedCluster(t *testing.T) {
	owners := [][]metav1.OwnerReference{nil, {ownerRef("c1", "c1-uid")}, {ownerRef("c1", "old")}, {ownerRef("c2", "x")}}
	marks := []*time.Time{nil, ptr(t0.Add(-time.Hour)), ptr(t0)}
	for _, owner := range owners {
		for _, mark := range marks {
			for _, c := range []*initlock.Cluster{nil, cluster(), cluster(paused)} {
				for _, grace := range []time.Duration{0, time.Minute} {
					l := lockOf("m1", owner...)
					l.ClusterAbsentSince = mark
					obs := initlock.Observation{ClusterName: "c1", Lock: l, Cluster: c, Holder: machine("m1")}
					d := initlock.Decide(obs, initlock.Policy{ReleaseAfterInit: true, OrphanGrace: grace}, t0)
					if d.Action == initlock.ActionRelease || d.Action == initlock.ActionCollect {
						t.Errorf("owner=%v mark=%v cluster=%+v grace=%s: %s deletes a held lock", owner, mark, c, grace, d)
					}
				}
			}
		}
	}
}

func ptr[T any](v T) *T { return &v }
