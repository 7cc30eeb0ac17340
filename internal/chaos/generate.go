package chaos

import (
	"fmt"
	"math/rand/v2"
	"sort"
	"time"

	"github.com/initlock/initlock/internal/kubeenv/faults"
)

// Generate makes the scenario of a seed. The same seed and size always give
// the same Plan.
func Generate(seed uint64, size Size) Plan {
	r := rand.New(rand.NewPCG(seed, 0x1417))
	between := func(lo, hi int) int { return lo + r.IntN(hi-lo+1) }
	dur := func(lo, hi time.Duration) time.Duration { return lo + time.Duration(r.Int64N(int64(hi-lo)+1)) }
	p := Plan{
		Seed:        seed,
		Controllers: between(size.MinControllers, size.MaxControllers),
		InitSuccess: 0.4,
		MinHold:     50 * time.Millisecond,
		MaxHold:     600 * time.Millisecond,
		Activity:    size.Activity,
		Timings:     ManagerTimings{OrphanGrace: time.Second, OrphanSettle: 300 * time.Millisecond},
	}
	n := between(size.MinClusters, size.MaxClusters)
	foreignAt := -1
	if r.Float64() < 0.3 {
		foreignAt = r.IntN(n)
	}
	for i := range n {
		c := ClusterPlan{Name: fmt.Sprintf("c%d", i), Finalizer: r.IntN(2) == 0}
		for j := range between(1, size.MaxMachines) {
			c.Machines = append(c.Machines, fmt.Sprintf("c%d-cp-%d", i, j))
		}
		switch x := r.Float64(); {
		case i == foreignAt:
			c.Foreign = ForeignKind(1 + r.IntN(3))
		case x < 0.15:
			c.Initialized, c.UpstreamLock = true, true
		case x < 0.35:
			c.UpstreamLock = true
		}
		p.Clusters = append(p.Clusters, c)
	}
	replicas := between(2, 3)
	// The first replica never elects a leader: the worst case, and it keeps
	// the fleet working while an elected leader's Lease runs out.
	p.LeaderElection = []bool{false}
	for range replicas - 1 {
		p.LeaderElection = append(p.LeaderElection, r.IntN(2) == 0)
	}
	p.ClientFaults = faultLevel(r)
	if r.Float64() < 0.5 {
		p.Interrupt, p.InterruptWithin = 0.1, 60*time.Millisecond
	}
	p.ManagerFaults = faultLevel(r)
	if r.Float64() < 0.5 {
		p.ClientFaults.LateWrite, p.ClientFaults.MaxLateDelay = 0.03, dur(100*time.Millisecond, time.Second)
	}
	if r.Float64() < 0.5 {
		p.ManagerFaults.LateWrite, p.ManagerFaults.MaxLateDelay = 0.03, dur(100*time.Millisecond, time.Second)
	}
	if r.Float64() < 0.5 {
		p.ManagerFaults.WatchLag = dur(100*time.Millisecond, 1500*time.Millisecond)
	}
	if r.Float64() < 0.6 {
		p.StaleViews, p.CacheLag = 0.3, dur(50*time.Millisecond, time.Second)
	}
	if r.Float64() < 0.5 {
		p.ManagerFaults.RelinkWatchLag = dur(200*time.Millisecond, 2*time.Second)
	}

	for range between(size.MinActions, size.MaxActions) {
		a := Action{At: dur(0, size.Activity*9/10), Cluster: r.IntN(n)}
		switch x := r.Float64(); {
		case x < 0.04:
			a.Kind = faults.SameNameOwner
		case x < 0.25:
			a.Kind = faults.BackupRestore
			rp := &RestorePlan{Mode: ModeVelero, Order: OrderVelero, Shuffle: r.Uint64(), Abort: -1,
				Gap: 300 * time.Millisecond, StatusAfter: dur(0, 500*time.Millisecond), UnpauseAfter: dur(0, 500*time.Millisecond)}
			if r.Float64() < 0.25 {
				rp.Mode = ModeNaive
			}
			switch y := r.Float64(); {
			case y < 0.3:
				rp.Order = OrderReverse
			case y < 0.6:
				rp.Order = OrderRandom
			}
			rp.Paused = r.Float64() < 0.4
			if r.Float64() < 0.2 {
				rp.Abort = r.Float64()
			}
			a.Restore = rp
		case x < 0.37:
			a.Kind, a.Replica, a.Delay = faults.ManagerKilled, r.IntN(replicas), dur(0, time.Second)
		case x < 0.43:
			a.Kind, a.Held = faults.LockDeleted, r.Float64() < 0.7
		case x < 0.48:
			a.Kind, a.Held, a.Delay = faults.LockDeletionHeld, r.Float64() < 0.7, dur(100*time.Millisecond, time.Second)
		case x < 0.59:
			a.Kind, a.Held = faults.LockCollected, r.Float64() < 0.7
		case x < 0.65:
			a.Kind, a.Delay = faults.Pause, dur(100*time.Millisecond, time.Second)
		case x < 0.79:
			a.Kind, a.Machine, a.Delay = faults.MachineRecreated, r.IntN(size.MaxMachines), dur(0, 500*time.Millisecond)
			a.Held = r.Float64() < 0.7
		case x < 0.93:
			a.Kind, a.Held, a.Delay = faults.ClusterRestoredOld, r.Float64() < 0.7, dur(0, 500*time.Millisecond)
			a.FromSetup = r.Float64() < 0.3
		case x < 0.965:
			a.Kind = faults.ClusterDeleted
		default:
			a.Kind, a.Held, a.Move = faults.MarkLeft, true, x >= 0.985
		}
		p.Actions = append(p.Actions, a)
	}
	sort.SliceStable(p.Actions, func(i, j int) bool { return p.Actions[i].At < p.Actions[j].At })
	return p
}

func faultLevel(r *rand.Rand) Faults {
	switch x := r.Float64(); {
	case x < 0.25:
		return Faults{}
	case x < 0.75:
		return Faults{Conflict: 0.02, ServerError: 0.02, Timeout: 0.01, LostResponse: 0.02, MaxLatency: 20 * time.Millisecond}
	default:
		return Faults{Conflict: 0.05, ServerError: 0.05, Timeout: 0.03, LostResponse: 0.05, MaxLatency: 40 * time.Millisecond}
	}
}
