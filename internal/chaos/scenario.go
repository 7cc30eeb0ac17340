package chaos

import (
	"fmt"
	"math/rand/v2"
	"sort"
	"strings"
	"time"

	"github.com/initlock/initlock/internal/kubeenv/faults"
)

// Size is how big the scenarios Generate makes are.
type Size struct {
	// MinClusters and MaxClusters bound the number of Clusters.
	MinClusters, MaxClusters int
	// MaxMachines is the most control-plane Machines a Cluster has.
	MaxMachines int
	// MinControllers and MaxControllers bound the simulated bootstrap
	// controllers.
	MinControllers, MaxControllers int
	// Activity is how long the controllers and the driver run.
	Activity time.Duration
	// MinActions and MaxActions bound the driver's actions.
	MinActions, MaxActions int
}

// Sizes of scenario.
var (
	// SizeShort runs in a few seconds: the size the test suite uses.
	SizeShort = Size{MinClusters: 4, MaxClusters: 6, MaxMachines: 3, MinControllers: 2, MaxControllers: 3,
		Activity: 2500 * time.Millisecond, MinActions: 4, MaxActions: 8}
	// SizeLong is for runs on demand.
	SizeLong = Size{MinClusters: 6, MaxClusters: 12, MaxMachines: 3, MinControllers: 3, MaxControllers: 4,
		Activity: 6 * time.Second, MinActions: 8, MaxActions: 16}
)

// ForeignKind is how a Cluster's lock name is taken by a ConfigMap that is
// not a lock.
type ForeignKind int

// Foreign kinds.
const (
	ForeignNone ForeignKind = iota
	// ForeignUnlabelled: the ConfigMap has the data key but no label.
	ForeignUnlabelled
	// ForeignNoKey: the ConfigMap has the label but no data key.
	ForeignNoKey
	// ForeignOtherCluster: the label names another cluster.
	ForeignOtherCluster
)

// ClusterPlan is one Cluster of a scenario.
type ClusterPlan struct {
	Name     string
	Machines []string
	// Finalizer makes deleting the Cluster a two-step affair, as Cluster
	// API's own finalizer does.
	Finalizer bool
	// UpstreamLock starts the Cluster with a lock written by an upstream
	// provider (no grant) held by its first Machine.
	UpstreamLock bool
	// Initialised starts the Cluster initialised, its upstream lock still
	// held: the single-node case.
	Initialised bool
	// Foreign takes the lock's name with a ConfigMap that is not a lock.
	Foreign ForeignKind
}

// ActionKind is what the driver does; each injects a fault class
// (actionClasses).
type ActionKind string

// Actions of the driver.
const (
	// ActKill sends SIGKILL to a manager replica, restarted after Delay.
	ActKill ActionKind = "kill-manager"
	// ActDeleteLock deletes a lock as an operator would with kubectl: the
	// lock guard refuses it unless the lock is marked for release.
	ActDeleteLock ActionKind = "delete-lock"
	// ActHoldDeletion puts another controller's finalizer on a lock for
	// Delay: a release that deletes it meanwhile leaves it being deleted,
	// held back, until the finalizer goes.
	ActHoldDeletion ActionKind = "hold-deletion"
	// ActStaleOwner points the lock's ownerReference at a Cluster UID that
	// does not exist, as a naive copy does: the garbage collector tries to
	// delete the lock, which the lock guard refuses.
	ActStaleOwner ActionKind = "stale-owner"
	// ActPause pauses a Cluster for Delay.
	ActPause ActionKind = "pause"
	// ActReplaceMachine deletes a Machine and creates one with the same name
	// (and a new UID) after Delay. Held aims it at a Cluster whose lock is
	// held: an even Machine picks the holder, an odd one a Machine waiting
	// for the lock.
	ActReplaceMachine ActionKind = "replace-machine"
	// ActOldBackup deletes a Cluster, and only the Cluster, and restores it
	// Velero-style from an older copy: the one setup created (FromSetup: no
	// grant register) or one read Delay before. Its UID changes and its
	// register goes back to what the copy holds.
	ActOldBackup ActionKind = "old-backup"
	// ActRestore backs a Cluster up, loses it and restores it.
	ActRestore ActionKind = "restore"
	// ActDecommission deletes a Cluster and its Machines for good.
	ActDecommission ActionKind = "decommission"
)

// actionClasses are the fault classes of the catalogue
// (internal/kubeenv/faults) the actions inject.
var actionClasses = map[ActionKind]faults.Class{
	ActKill:           faults.ManagerKilled,
	ActDeleteLock:     faults.LockDeleted,
	ActHoldDeletion:   faults.LockDeletionHeld,
	ActStaleOwner:     faults.LockCollected,
	ActPause:          faults.Pause,
	ActReplaceMachine: faults.MachineRecreated,
	ActOldBackup:      faults.ClusterRestoredOld,
	ActRestore:        faults.BackupRestore,
	ActDecommission:   faults.ClusterDeleted,
}

// Action is one step of the driver.
type Action struct {
	At      time.Duration
	Kind    ActionKind
	Cluster int
	Replica int
	Machine int
	Delay   time.Duration
	// Held aims the action at a Cluster with two Machines or more whose
	// lock one of them holds at that moment, the first from Cluster on,
	// waiting up to a second for one.
	Held bool
	// FromSetup: see ActOldBackup.
	FromSetup bool
	Restore   *RestorePlan `json:",omitempty"`
}

func (a Action) String() string {
	s := fmt.Sprintf("%5.2fs %s", a.At.Seconds(), a.Kind)
	switch a.Kind {
	case ActKill:
		s += fmt.Sprintf(" mgr-%d down %s", a.Replica+1, a.Delay)
	case ActRestore:
		s += fmt.Sprintf(" cluster #%d %s", a.Cluster, a.Restore)
	case ActReplaceMachine:
		s += fmt.Sprintf(" cluster #%d machine #%d after %s", a.Cluster, a.Machine, a.Delay)
	case ActPause:
		s += fmt.Sprintf(" cluster #%d for %s", a.Cluster, a.Delay)
	case ActOldBackup:
		if a.FromSetup {
			s += fmt.Sprintf(" cluster #%d from the copy made at setup", a.Cluster)
		} else {
			s += fmt.Sprintf(" cluster #%d from a copy %s old", a.Cluster, a.Delay)
		}
	default:
		s += fmt.Sprintf(" cluster #%d", a.Cluster)
	}
	if a.Held {
		s += " (or a held one)"
	}
	return s
}

// Restore modes and orders.
const (
	// ModeVelero restores as Velero does: no UIDs, no ownerReferences, no
	// status.
	ModeVelero = "velero"
	// ModeNaive re-creates the objects as a copy with kubectl does: the
	// ownerReferences keep the old UIDs.
	ModeNaive = "naive"

	// OrderVelero: ConfigMaps, then Machines, then Clusters.
	OrderVelero = "velero-order"
	// OrderReverse: Clusters, then Machines, then ConfigMaps.
	OrderReverse = "reverse-order"
	// OrderRandom: any order.
	OrderRandom = "random-order"
)

// RestorePlan is how a Cluster is restored.
type RestorePlan struct {
	Mode, Order string
	// Shuffle seeds the random order.
	Shuffle uint64
	// Paused: the Cluster is paused before the backup and unpaused
	// UnpauseAfter after the restore.
	Paused       bool
	UnpauseAfter time.Duration
	// Abort, when at least 0, deletes the Cluster mid-restore once that
	// fraction of the objects is restored; it does not come back.
	Abort float64
	// Gap is the most time between two restored objects.
	Gap time.Duration
	// StatusAfter is how long an initialised Cluster's status takes to come
	// back once it is restored.
	StatusAfter time.Duration
}

func (r *RestorePlan) String() string {
	s := r.Mode + " " + r.Order
	if r.Paused {
		s += " paused"
	}
	if r.Abort >= 0 {
		s += fmt.Sprintf(" cluster-deleted-at=%.0f%%", r.Abort*100)
	}
	return s
}

// Plan is a scenario: everything about it that its seed decides.
type Plan struct {
	Seed     uint64
	Clusters []ClusterPlan
	// LeaderElection of each manager replica.
	LeaderElection []bool
	Controllers    int
	ClientFaults   Faults
	// Interrupt is the chance that a bootstrap controller's Lock call is
	// cut off after a random time below InterruptWithin, as when its
	// process dies mid-reconcile.
	Interrupt       float64
	InterruptWithin time.Duration
	ManagerFaults   Faults
	// InitSuccess is the chance that a Machine's kubeadm init succeeds; on
	// failure it calls Unlock.
	InitSuccess float64
	// MinHold and MaxHold bound how long an init runs.
	MinHold, MaxHold time.Duration
	// StaleViews is the chance that a bootstrap controller's Lock call, or
	// the Unlock call of a failed init, is made with the Cluster and the
	// Machine read from its informer cache, whose watch events are delayed
	// by CacheLag.
	StaleViews float64
	CacheLag   time.Duration
	Activity   time.Duration
	Actions    []Action
	Timings    ManagerTimings
}

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
			c.Initialised, c.UpstreamLock = true, true
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

	for range between(size.MinActions, size.MaxActions) {
		a := Action{At: dur(0, size.Activity*9/10), Cluster: r.IntN(n)}
		switch x := r.Float64(); {
		case x < 0.25:
			a.Kind = ActRestore
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
			a.Kind, a.Replica, a.Delay = ActKill, r.IntN(replicas), dur(0, time.Second)
		case x < 0.43:
			a.Kind, a.Held = ActDeleteLock, r.Float64() < 0.7
		case x < 0.48:
			a.Kind, a.Held, a.Delay = ActHoldDeletion, r.Float64() < 0.7, dur(100*time.Millisecond, time.Second)
		case x < 0.59:
			a.Kind, a.Held = ActStaleOwner, r.Float64() < 0.7
		case x < 0.65:
			a.Kind, a.Delay = ActPause, dur(100*time.Millisecond, time.Second)
		case x < 0.79:
			a.Kind, a.Machine, a.Delay = ActReplaceMachine, r.IntN(size.MaxMachines), dur(0, 500*time.Millisecond)
			a.Held = r.Float64() < 0.7
		case x < 0.93:
			a.Kind, a.Held, a.Delay = ActOldBackup, r.Float64() < 0.7, dur(0, 500*time.Millisecond)
			a.FromSetup = r.Float64() < 0.3
		default:
			a.Kind = ActDecommission
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

// String describes the plan in a few lines.
func (p Plan) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "seed %d: %d clusters, %d bootstrap controllers, manager replicas leader-elect=%v\n",
		p.Seed, len(p.Clusters), p.Controllers, p.LeaderElection)
	fmt.Fprintf(&b, "  client faults: %s; Lock calls cut off: %.0f%% within %s\n  manager faults: %s\n",
		p.ClientFaults, p.Interrupt*100, p.InterruptWithin, p.ManagerFaults)
	fmt.Fprintf(&b, "  stale views: %.0f%% of the calls, from a cache lagging %s\n", p.StaleViews*100, p.CacheLag)
	for _, c := range p.Clusters {
		fmt.Fprintf(&b, "  cluster %s: %d machines", c.Name, len(c.Machines))
		if c.Finalizer {
			b.WriteString(", finalizer")
		}
		if c.UpstreamLock {
			b.WriteString(", upstream lock")
		}
		if c.Initialised {
			b.WriteString(", initialised")
		}
		if c.Foreign != ForeignNone {
			fmt.Fprintf(&b, ", lock name taken (foreign kind %d)", c.Foreign)
		}
		b.WriteString("\n")
	}
	for _, a := range p.Actions {
		fmt.Fprintf(&b, "  %s\n", a)
	}
	return b.String()
}
