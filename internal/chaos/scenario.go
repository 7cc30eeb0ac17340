package chaos

import (
	"fmt"
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
	// Initialized starts the Cluster initialised, its upstream lock still
	// held: the single-node case.
	Initialized bool
	// Foreign takes the lock's name with a ConfigMap that is not a lock.
	Foreign ForeignKind
}

// Action is one step of the driver.
type Action struct {
	At time.Duration
	// Kind is the fault class of the catalogue (internal/kubeenv/faults)
	// the action injects, one of driverClasses; the driver's act tells
	// what it does for each.
	Kind    faults.Class
	Cluster int
	Replica int
	Machine int
	Delay   time.Duration
	// Held aims the action at a Cluster with two Machines or more whose
	// lock one of them holds at that moment, the first from Cluster on,
	// waiting up to a second for one.
	Held bool
	// FromSetup and Move: see the driver's cases of
	// faults.ClusterRestoredOld and faults.MarkLeft.
	FromSetup bool
	Move      bool         `json:",omitempty"`
	Restore   *RestorePlan `json:",omitempty"`
}

func (a Action) String() string {
	s := fmt.Sprintf("%5.2fs %s", a.At.Seconds(), a.Kind)
	switch a.Kind {
	case faults.ManagerKilled:
		s += fmt.Sprintf(" mgr-%d down %s", a.Replica+1, a.Delay)
	case faults.BackupRestore:
		s += fmt.Sprintf(" cluster #%d %s", a.Cluster, a.Restore)
	case faults.MachineRecreated:
		s += fmt.Sprintf(" cluster #%d machine #%d after %s", a.Cluster, a.Machine, a.Delay)
	case faults.Pause:
		s += fmt.Sprintf(" cluster #%d for %s", a.Cluster, a.Delay)
	case faults.ClusterRestoredOld:
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
		if c.Initialized {
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
