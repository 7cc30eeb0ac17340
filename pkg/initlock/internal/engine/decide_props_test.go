package engine_test

import (
	"errors"
	"testing"
	"time"

	"github.com/initlock/initlock/pkg/initlock/internal/engine"
	"github.com/initlock/initlock/pkg/initlock/internal/report"
)

// The choices an Observation is built from, for the property tests: every
// combination of them (TestDecideProperties) and fuzzed ones (FuzzDecide).
var (
	propLocks = []func() *engine.Lock{
		func() *engine.Lock { return nil },
		func() *engine.Lock { return upstreamLock("m1", owned) },
		func() *engine.Lock { return upstreamLock("m2") },
		func() *engine.Lock { return lockOf("m1", "t1", owned) },
		func() *engine.Lock { return lockOf("m1", "mine") },
		func() *engine.Lock { return lockOf("m2", "t2", owned) },
		func() *engine.Lock { return lockOf("m2", "") },
		func() *engine.Lock { return handedOver("m2") },
		func() *engine.Lock { return releasable(upstreamLock("m1", owned)) },
		func() *engine.Lock { return releasable(lockOf("m1", "t1", owned)) },
		func() *engine.Lock { return beingDeleted(lockOf("m1", "t1", owned)) },
		func() *engine.Lock { return beingDeleted(upstreamLock("m2")) },
		func() *engine.Lock { return restoredLock("m1", "t1") },
		func() *engine.Lock { return withMark(lockOf("m2", "t2"), t0.Add(-time.Hour)) },
		func() *engine.Lock { return &engine.Lock{Name: "c1-lock", Problem: report.ErrNotALock} },
		func() *engine.Lock { return &engine.Lock{Name: "c1-lock", Problem: report.ErrCorruptLock} },
	}
	propRegisters = []func(*engine.Cluster){
		func(*engine.Cluster) {}, released, damagedGrant,
		grantTo("m1", "t1"), grantTo("m1", "mine"), grantTo("m2", "t2"), restoredGrant("m1", "t1"), restoredGrant("m2", "t2"),
	}
	propStates   = []func(*engine.Cluster){func(*engine.Cluster) {}, paused, initialized, deleting}
	propMachines = []func(string) *engine.Machine{
		func(string) *engine.Machine { return nil }, machine, recreated,
	}
	propIntents = []engine.Intent{engine.IntentKeep, engine.IntentLock, engine.IntentUnlock, engine.IntentRelease}
)

// propObservation builds an Observation from choice indexes.
func propObservation(c []int) engine.Observation {
	pick := func(i, n int) int { return c[i] % n }
	o := engine.Observation{ClusterName: "c1", Intent: propIntents[pick(0, len(propIntents))]}
	o.Lock = propLocks[pick(1, len(propLocks))]()
	if pick(2, 5) > 0 {
		o.Cluster = cluster(propRegisters[pick(3, len(propRegisters))], propStates[pick(4, len(propStates))])
	}
	if o.Lock != nil && o.Lock.Problem == nil {
		o.Holder = propMachines[pick(5, len(propMachines))](o.Lock.Record.MachineName)
	}
	if o.Cluster != nil && o.Cluster.Grant.Held() && !o.Cluster.Initialized {
		o.Granted = propMachines[pick(6, len(propMachines))](o.Cluster.Grant.MachineName)
	}
	switch o.Intent {
	case engine.IntentLock:
		o.Caller = []*engine.Machine{machine("m1"), recreated("m1")}[pick(7, 2)]
		o.CallerLive = propMachines[pick(8, len(propMachines))]("m1")
		// What Read gives: the caller's live Machine stands for any Machine
		// of its name.
		if o.Lock != nil && o.Lock.Problem == nil && o.Lock.Record.MachineName == "m1" {
			o.Holder = o.CallerLive
		}
		if o.Granted != nil && o.Granted.Name == "m1" || o.Cluster != nil && o.Cluster.Grant.Held() && o.Cluster.Grant.MachineName == "m1" && !o.Cluster.Initialized {
			o.Granted = o.CallerLive
		}
	case engine.IntentUnlock:
		o.Caller = []*engine.Machine{nil, machine("m1"), recreated("m1")}[pick(7, 3)]
		if o.Caller != nil {
			o.CallerLive = propMachines[pick(8, len(propMachines))]("m1")
		}
	}
	if pick(9, 2) == 1 {
		o.Tokens = []string{"mine"}
	}
	o.Uncertain = pick(10, 2) == 1
	o.ClaimUncertain = pick(11, 2) == 1
	if o.Intent == engine.IntentKeep {
		// Keepers do not read Uncertain: the same choice puts the lock out
		// of the watch filter.
		o.OutOfScope, o.Uncertain = o.Uncertain, false
	}
	return o
}

const propChoices = 12

// checkProperties checks the rules every decision keeps, whatever it is
// asked.
func checkProperties(t *testing.T, o engine.Observation, d engine.Decision) {
	t.Helper()
	fail := func(rule string) { t.Errorf("%s\nobservation: %+v\ncluster: %+v\ndecision: %s", rule, o, o.Cluster, d) }
	cl := o.Cluster
	heldBy := func(m *engine.Machine, ref engine.Ref) bool { return m != nil && ref.Names(cl, m) }
	ownWithdrawal := o.Intent == engine.IntentLock && d.Register == engine.RegisterWithdraw
	if d.Err != nil && (d.Acquired || d.Action != engine.ActionNone || (d.Register != engine.RegisterNone && !ownWithdrawal)) {
		fail("an error writes nothing but the withdrawal of the call's own grant")
	}
	if cl != nil && cl.Paused && d.Writes() {
		fail("nothing is written to a paused Cluster or its lock")
	}
	if d.Writes() && d.Register != engine.RegisterNone && d.Action != engine.ActionNone && o.Intent != engine.IntentLock && o.Intent != engine.IntentUnlock && o.Intent != engine.IntentRelease {
		fail("keepers never write the register")
	}
	if o.Lock != nil && errors.Is(o.Lock.Problem, report.ErrNotALock) && d.Action != engine.ActionNone {
		fail("a ConfigMap that is not a lock is never written")
	}
	switch o.Intent {
	case engine.IntentKeep:
		if d.Register != engine.RegisterNone || d.Acquired {
			fail("keepers never write the register nor acquire")
		}
		switch d.Action {
		case engine.ActionNone, engine.ActionAdopt, engine.ActionRelease, engine.ActionMarkOrphan, engine.ActionCollect, engine.ActionUnmark:
		default:
			fail("keepers never create or rewrite a lock")
		}
		deletes := d.Action == engine.ActionRelease || d.Action == engine.ActionCollect
		if deletes && cl != nil && !cl.Initialized && !cl.Deleting &&
			o.Lock.Problem == nil && heldBy(o.Holder, o.Lock.Record.Ref) {
			fail("keepers never delete a lock held by an existing Machine of a live, uninitialised Cluster")
		}
		if deletes && cl != nil && !cl.Initialized && !cl.Deleting && cl.Grant.Held() && heldBy(o.Granted, cl.Grant.Ref) {
			fail("keepers never delete a lock while the grant register names an existing Machine of a live, uninitialised Cluster")
		}
		if o.Lock != nil && o.Lock.Deleting && d.Action != engine.ActionNone {
			fail("keepers never write a lock being deleted")
		}
		if o.OutOfScope && d.Action == engine.ActionAdopt {
			fail("keepers never adopt a lock outside their watch filter")
		}
	case engine.IntentLock:
		if o.Lock != nil && o.Lock.Deleting && d.Action != engine.ActionNone {
			fail("a lock being deleted is never written by a Lock call")
		}
		if !d.Acquired {
			if d.Register == engine.RegisterClaim || d.Action == engine.ActionCreate || d.Action == engine.ActionTakeOver || d.Action == engine.ActionAdopt {
				fail("a refused caller writes nothing for itself")
			}
			unfinished := cl != nil && cl.Grant.Held() && o.Lock != nil && o.Lock.Problem == nil && o.CallerLive != nil && cl.Grant.Exact(cl, o.CallerLive) &&
				cl.Grant.Token != o.Lock.Record.Token && (o.Lock.Record.Token != "" || o.Lock.Record.HandedOverBy != "")
			if d.Register == engine.RegisterWithdraw && cl.Grant.Held() && (o.Uncertain || (!containsToken(o, cl.Grant.Token) && !unfinished)) {
				fail("a caller withdraws only a grant of its own call, or its own grant that a lock initlock wrote for another Machine does not carry, and only when no lock write of it may land later")
			}
			if d.Register == engine.RegisterWithdraw && !cl.Grant.Held() && (!o.ClaimUncertain || cl.Grant.Damaged()) {
				fail("a caller fences a register that names no one only against a claim of its own that may land later")
			}
			if d.Action == engine.ActionRelease {
				fail("a Lock call deletes no lock")
			}
			return
		}
		if cl == nil || o.CallerLive == nil || o.CallerLive.UID != o.Caller.UID {
			fail("the lock is granted only to the live Machine of an existing Cluster")
			return
		}
		if o.Lock != nil && o.Lock.Problem == nil && heldBy(o.Holder, o.Lock.Record.Ref) && o.Holder.Name != o.Caller.Name {
			fail("the lock is never granted while the lock names another existing Machine")
		}
		if !cl.Initialized && cl.Grant.Held() && heldBy(o.Granted, cl.Grant.Ref) && o.Granted.Name != o.Caller.Name {
			fail("the lock is never granted while the register names another existing Machine")
		}
		if !cl.Initialized && d.Register != engine.RegisterClaim {
			g, r := cl.Grant, o.Lock
			relied := g.Held() && r != nil && g.Token != "" && g.Token == r.Record.Token && g.Exact(cl, o.CallerLive) && r.Record.Exact(cl, o.CallerLive)
			completes := g.Held() && containsToken(o, g.Token) && g.Exact(cl, o.CallerLive) &&
				(d.Action == engine.ActionCreate || d.Action == engine.ActionTakeOver)
			if !relied && !completes {
				fail("without writing the register, the lock is granted only when the register and the lock name the caller exactly with one token, or the register holds this call's own claim for the caller exactly and the lock is written with it")
			}
		}
		if cl.Initialized && d.Register != engine.RegisterNone {
			fail("the register is not written once the control plane is initialised")
		}
		if o.Lock != nil && o.Lock.Releasable && !o.Lock.Deleting && !cl.Initialized && d.Action == engine.ActionNone {
			fail("a caller relies on a lock marked for release only by taking the mark off")
		}
	case engine.IntentUnlock, engine.IntentRelease:
		if d.Acquired || d.Register == engine.RegisterClaim {
			fail("a release acquires nothing")
		}
		if d.Action == engine.ActionRelease && o.Intent == engine.IntentUnlock && o.Caller != nil &&
			(o.Lock.Problem != nil || !o.Lock.Record.Names(cl, o.Caller)) {
			fail("Unlock deletes only the lock of the Machine it is given")
		}
		if o.Intent == engine.IntentUnlock && o.Caller != nil && d.Writes() &&
			(o.CallerLive == nil || o.CallerLive.UID != o.Caller.UID) {
			fail("Unlock by an object that is not the live Machine of its name writes nothing")
		}
		if d.Register == engine.RegisterWithdraw && cl.Grant.Held() && !containsToken(o, cl.Grant.Token) {
			fail("a grant is withdrawn only once this call has retired it")
		}
	}
}

func containsToken(o engine.Observation, token string) bool {
	for _, t := range o.Tokens {
		if t == token && t != "" {
			return true
		}
	}
	return false
}

// TestDecideProperties checks the properties on every combination of the
// choices, and on every row of the decision table.
func TestDecideProperties(t *testing.T) {
	sizes := []int{len(propIntents), len(propLocks), 5, len(propRegisters), len(propStates), len(propMachines), len(propMachines), 3, len(propMachines), 2, 2, 2}
	c := make([]int, propChoices)
	n := 0
	for {
		o := propObservation(c)
		checkProperties(t, o, engine.Decide(o, engine.DefaultPolicy, t0))
		n++
		i := 0
		for ; i < len(c); i++ {
			c[i]++
			if c[i] < sizes[i] {
				break
			}
			c[i] = 0
		}
		if i == len(c) || t.Failed() {
			break
		}
	}
	for _, row := range decideRows {
		row.obs.ClusterName = "c1"
		checkProperties(t, row.obs, engine.Decide(row.obs, engine.DefaultPolicy, t0))
	}
	t.Logf("%d observations checked", n)
}

// FuzzDecide checks the properties on fuzzed observations.
func FuzzDecide(f *testing.F) {
	f.Add([]byte{1, 3, 1, 3, 0, 1, 1, 0, 1, 0, 0, 1})
	f.Add([]byte{2, 3, 1, 3, 0, 1, 1, 1, 1, 1, 0, 0})
	f.Fuzz(func(t *testing.T, data []byte) {
		c := make([]int, propChoices)
		for i := range c {
			if i < len(data) {
				c[i] = int(data[i])
			}
		}
		o := propObservation(c)
		checkProperties(t, o, engine.Decide(o, engine.DefaultPolicy, t0))
	})
}
