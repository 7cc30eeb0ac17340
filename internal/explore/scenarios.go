package explore

import (
	"time"

	"github.com/initlock/initlock/internal/kubeenv/faults"
)

// Scenarios are the explorations `make test` runs. Each is small enough to
// run in seconds; together they exercise every fault class of the
// catalogue (internal/kubeenv/faults) the explorer models, which
// TestExplore checks, and each mutation of mutations_test.go is caught by
// one of them.
func Scenarios() []Scenario {
	p := func(m string, attempts int) Provider { return Provider{Machine: m, Attempts: attempts} }
	return []Scenario{
		{Name: "race", Providers: []Provider{p("m1", 1), p("m2", 1)}, MaxSteps: 100},
		{Name: "race-annotated", Providers: []Provider{p("m1", 1), p("m2", 1)}, Annotated: true, MaxSteps: 100},
		{Name: "pause", Providers: []Provider{{Machine: "m1", Attempts: 1, ViewDepth: 1}}, StaleReads: 1,
			Adversary: []EventKind{Pause, Unpause}, Events: 2, MaxSteps: 100},
		{Name: "loss", Providers: []Provider{p("m1", 1), p("m2", 1)},
			Adversary: []EventKind{DeleteLock, RemoveRegister, RevertRegister}, Events: 1, Losses: 1, MaxSteps: 100},
		{Name: "stale-caller", Providers: []Provider{{Machine: "m1", Attempts: 2, ViewDepth: 2}}, StaleReads: 1,
			Adversary: []EventKind{RecreateMachine}, Events: 1, MaxSteps: 100},
		{Name: "manager-replaced", Providers: []Provider{p("m1", 1)}, Reconciles: 1, ManagerViewDepth: 3, StaleReads: 1,
			Before: []EventKind{InitCompletes, ReplaceCluster}, MaxSteps: 100},
		{Name: "relock-after-unlock", Providers: []Provider{{Machine: "m1", Attempts: 2, Unlock: true, ViewDepth: 3}},
			StaleReads: 1, Faults: 1, FaultsOn: []string{"provider/m1 delete ConfigMap"}, FaultKinds: []faults.Class{faults.ServerError, faults.Refused}, MaxSteps: 100},
		{Name: "unlock-stale", Providers: []Provider{{Machine: "m1", Name: "m1-old", Incarnation: 1, Attempts: 1, Unlock: true},
			{Machine: "m1", Name: "m1-new", Incarnation: 2, Attempts: 1}},
			Adversary: []EventKind{RecreateMachine}, Events: 1, MaxSteps: 100},
		{Name: "upstream-late", UpstreamHolder: "m2", Providers: []Provider{p("m1", 2)},
			Faults: 2, Late: 2, Adversary: []EventKind{DeleteLock}, Events: 1, Losses: 1, MaxSteps: 100},
		{Name: "upstream-holder-race", UpstreamHolder: "m1", Providers: []Provider{p("m1", 1), p("m2", 2)}, MaxSteps: 100},
		{Name: "upstream-holder-lost", UpstreamHolder: "m1", Providers: []Provider{p("m1", 2), p("m2", 1)},
			Faults: 1, FaultsOn: []string{"provider/m1 patch ConfigMap"}, FaultKinds: []faults.Class{faults.LostResponse},
			Adversary: []EventKind{RevertRegister}, Events: 1, Losses: 1, MaxSteps: 120},
		{Name: "mutex-unlock-lost", Providers: []Provider{{Machine: "m1", Attempts: 1, Unlock: true, AnyHolder: true}, p("m2", 1)},
			Faults: 1, FaultsOn: []string{"provider/m1 delete ConfigMap"}, FaultKinds: []faults.Class{faults.LostResponse}, MaxSteps: 120},
		{Name: "operator-release-lost", UpstreamHolder: "m1", Before: []EventKind{DeleteMachine}, Operator: true, Guard: true,
			Providers: []Provider{p("m2", 1)}, Faults: 1, FaultsOn: []string{"operator delete ConfigMap"},
			FaultKinds: []faults.Class{faults.LostResponse}, MaxSteps: 120},
		{Name: "operator-holder-back", UpstreamHolder: "m1", Before: []EventKind{DeleteMachine}, Operator: true, Guard: true,
			Providers: []Provider{{Machine: "m2", Upstream: true, Attempts: 1}},
			Faults:    1, FaultsOn: []string{"operator patch ConfigMap", "operator delete ConfigMap"}, FaultKinds: []faults.Class{faults.ServerError, faults.LostResponse},
			Adversary: []EventKind{MachineBack, DeleteLock}, Events: 2, Losses: 1, MaxSteps: 120},
		{Name: "operator-lock-appears", GrantHolder: "m1", Before: []EventKind{DeleteMachine}, Operator: true, OperatorForce: true, Guard: true,
			Providers: []Provider{{Machine: "m2", Upstream: true, Attempts: 1}}, MaxSteps: 120},
		{Name: "operator-grantee-back", GrantHolder: "m1", Before: []EventKind{DeleteMachine}, Operator: true, Guard: true,
			Providers: []Provider{p("m2", 1)}, Adversary: []EventKind{MachineBack}, Events: 1, MaxSteps: 120},
		{Name: "keeper-holder-back", UpstreamHolder: "m1", Before: []EventKind{DeleteMachine}, Reconciles: 2, Guard: true,
			Providers: []Provider{{Machine: "m2", Upstream: true, Attempts: 1}},
			Faults:    1, FaultsOn: []string{"manager patch ConfigMap", "manager delete ConfigMap"}, FaultKinds: []faults.Class{faults.ServerError, faults.LostResponse},
			Adversary: []EventKind{MachineBack, DeleteLock}, Events: 2, Losses: 1, MaxSteps: 120},
		{Name: "release-during-move", UpstreamHolder: "m1", Before: []EventKind{DeleteMachine}, Reconciles: 1, Guard: true,
			Providers: []Provider{{Machine: "m2", Upstream: true, Attempts: 1}},
			Adversary: []EventKind{MachineBack, Pause, LeaveMoveMark}, Events: 3, MaxSteps: 120},
		{Name: "late-writes", Providers: []Provider{{Machine: "m1", Attempts: 2, Unlock: true}},
			Faults: 2, Late: 2, FaultKinds: []faults.Class{faults.LateWrite, faults.Refused}, MaxSteps: 100},
		{Name: "restore-unlock", Providers: []Provider{{Machine: "m1", Attempts: 2, Unlock: true}},
			Adversary: []EventKind{Backup, Restore}, Events: 2, MaxSteps: 120},
		{Name: "restore-relock", Providers: []Provider{{Machine: "m1", Attempts: 2, Relock: true, ViewDepth: 2}}, StaleReads: 1,
			Adversary: []EventKind{Backup, Restore}, Events: 2, MaxSteps: 120},
		{Name: "upstream-delete", Providers: []Provider{{Machine: "m1", Upstream: true, Attempts: 1}, {Machine: "m2", Upstream: true, Attempts: 2}},
			Reconciles: 2, Guard: true, Adversary: []EventKind{DeleteLock}, Events: 1, Losses: 1, MaxSteps: 120},
		{Name: "upstream-failed-init", Providers: []Provider{{Machine: "m1", Upstream: true, Attempts: 2, Unlock: true}, {Machine: "m2", Upstream: true, Attempts: 2}},
			Reconciles: 2, Guard: true, MaxSteps: 120},
		{Name: "upstream-stale-holder", UpstreamHolder: "m0", Before: []EventKind{DeleteMachine},
			Providers: []Provider{{Machine: "m1", Upstream: true, Attempts: 2}, {Machine: "m2", Upstream: true, Attempts: 2}}, Reconciles: 2, Guard: true, MaxSteps: 120},
		{Name: "stale-holder-mixed", UpstreamHolder: "m0", Before: []EventKind{DeleteMachine},
			Providers: []Provider{{Machine: "m1", Attempts: 1}, {Machine: "m2", Upstream: true, Attempts: 1}}, Reconciles: 1, Guard: true,
			Adversary: []EventKind{DeleteLock}, Events: 1, Losses: 1, MaxSteps: 120},
		{Name: "mixed-fleet", Providers: []Provider{{Machine: "m1", Upstream: true, Attempts: 2, Unlock: true}, {Machine: "m2", Attempts: 1, Unlock: true}},
			Reconciles: 1, Guard: true, MaxSteps: 150},
		{Name: "mixed-restore", Providers: []Provider{{Machine: "m1", Upstream: true, Attempts: 1}, {Machine: "m2", Attempts: 1}},
			Guard: true, Adversary: []EventKind{Backup, Restore, DeleteLock}, Events: 3, Losses: 1, MaxSteps: 150},
		{Name: "released-restore", UpstreamHolder: "m1", Before: []EventKind{InitCompletes}, Providers: []Provider{{Machine: "m2", Upstream: true, Attempts: 1}},
			Reconciles: 1, Guard: true, Adversary: []EventKind{Backup, Restore, DeleteLock}, Events: 3, Losses: 1, MaxSteps: 120},
		{Name: "holder-recreated", UpstreamHolder: "m1", Providers: []Provider{{Machine: "m2", Upstream: true, Attempts: 2}},
			Reconciles: 1, ManagerViewDepth: 2, StaleReads: 1, Guard: true, Adversary: []EventKind{RecreateMachine}, Events: 1, MaxSteps: 120},
		{Name: "deleting-takeover", UpstreamHolder: "m0", Before: []EventKind{DeleteMachine, HoldDeletion},
			Providers: []Provider{{Machine: "m1", Attempts: 1}, {Machine: "m2", Upstream: true, Attempts: 2}}, Guard: true,
			Adversary: []EventKind{FinalizerGone}, Events: 1, Losses: 1, MaxSteps: 120},
		{Name: "cluster-deleting", UpstreamHolder: "m1", Providers: []Provider{{Machine: "m2", Upstream: true, Attempts: 1}},
			Reconciles: 2, Guard: true, Adversary: []EventKind{DeleteCluster, DeleteMachine}, Events: 2, MaxSteps: 120},
		{Name: "restore-cluster-first", UpstreamHolder: "m1", Providers: []Provider{{Machine: "m2", Upstream: true, Attempts: 2}},
			Reconciles: 2, Guard: true, Adversary: []EventKind{Backup, RestoreClusterFirst, MachinesRestored}, Events: 3, MaxSteps: 120},
		{Name: "restore-over-lock", UpstreamHolder: "m1", Providers: []Provider{{Machine: "m2", Upstream: true, Attempts: 2}},
			Reconciles: 2, Guard: true, Adversary: []EventKind{Backup, RestoreOverLock, MachinesRestored}, Events: 3, MaxSteps: 120},
		{Name: "reshaped-lock", UpstreamHolder: "m1", Providers: []Provider{{Machine: "m2", Upstream: true, Attempts: 2}},
			Reconciles: 1, Guard: true, Adversary: []EventKind{ReshapeLock}, Events: 1, Losses: 1, MaxSteps: 120},
		{Name: "release-mark-left", UpstreamHolder: "m1", Providers: []Provider{{Machine: "m2", Upstream: true, Attempts: 1}},
			Reconciles: 2, Guard: true, Adversary: []EventKind{Backup, RestoreClusterFirst, LeaveReleaseMark, MachinesRestored}, Events: 4, MaxSteps: 120},
		{Name: "marks-left-restoring", UpstreamHolder: "m1", Providers: []Provider{{Machine: "m2", Upstream: true, Attempts: 1}},
			Reconciles: 2, Guard: true, Adversary: []EventKind{Backup, RestoreClusterFirst, LeaveReleaseMark, LeaveMoveMark, CollectLock},
			Events: 5, Losses: 1, MaxSteps: 120},
		{Name: "move-mark-left", UpstreamHolder: "m1", Providers: []Provider{{Machine: "m2", Upstream: true, Attempts: 1}},
			Reconciles: 2, Guard: true, Adversary: []EventKind{Pause, LeaveMoveMark, Unpause}, Events: 3, MaxSteps: 120},
		{Name: "mark-replayed", UpstreamHolder: "m1", Providers: []Provider{{Machine: "m2", Upstream: true, Attempts: 1}},
			Reconciles: 1, Guard: true, Adversary: []EventKind{LeaveReleaseMark, Backup, RestoreUpdate, DeleteLock}, Events: 4, Losses: 1, MaxSteps: 120},
		{Name: "mark-of-an-earlier-lock", UpstreamHolder: "m1", Providers: []Provider{{Machine: "m2", Upstream: true, Attempts: 1}},
			Reconciles: 1, Guard: true, Adversary: []EventKind{ApplyOldLock, DeleteLockAtVersion}, Events: 2, Losses: 1, MaxSteps: 120},
		{Name: "record-escaped", UpstreamHolder: "m1", Providers: []Provider{{Machine: "m2", Upstream: true, Attempts: 1}},
			Reconciles: 1, Guard: true, Adversary: []EventKind{Backup, RestoreRewritten, DeleteLock}, Events: 3, Losses: 1, MaxSteps: 120},
		{Name: "manager-paused", UpstreamHolder: "m1", Before: []EventKind{InitCompletes}, Providers: []Provider{p("m2", 1)}, Reconciles: 1, ManagerViewDepth: 1, StaleReads: 1, Guard: true,
			Adversary: []EventKind{Pause, Unpause}, Events: 2, MaxSteps: 100},
		{Name: "pause-upstream-holder", UpstreamHolder: "m1", Providers: []Provider{p("m1", 1), p("m2", 1)},
			Adversary: []EventKind{Pause, Unpause}, Events: 2, MaxSteps: 120},
		{Name: "relink-owner-deleted", Relink: []string{"o1", "o2"}, Adversary: []EventKind{DeleteOwner}, Events: 1, MaxSteps: 40},
	}
}

// DeepScenarios are the larger explorations of make explore: three
// Machines, two attempts each, more faults and events at once, and the
// manager reconciling among providers. They take minutes to hours; the
// result of each (states, executions, deepest step) is the bound the
// protocol is proved to. Those with a Budget are explored to their end
// (race-3-manager, three callers with the manager and an adversary event,
// took 39 minutes on one core); the others as far as the time given.
func DeepScenarios() []Scenario {
	return []Scenario{
		{Name: "race-3", Budget: 5 * time.Minute, Providers: []Provider{{Machine: "m1", Attempts: 1}, {Machine: "m2", Attempts: 1}, {Machine: "m3", Attempts: 1}},
			Faults: 1, MaxSteps: 200},
		{Name: "race-faults", Providers: []Provider{{Machine: "m1", Attempts: 2, Unlock: true}, {Machine: "m2", Attempts: 2}},
			Faults: 2, Late: 1, FaultKinds: []faults.Class{faults.LateWrite, faults.ServerError, faults.LostResponse, faults.Refused}, MaxSteps: 200},
		{Name: "loss-stale", Providers: []Provider{{Machine: "m1", Attempts: 2, ViewDepth: 1}, {Machine: "m2", Attempts: 2, ViewDepth: 1}},
			StaleReads: 1, Adversary: []EventKind{DeleteLock, RemoveRegister, RevertRegister, RecreateMachine}, Events: 2, Losses: 1,
			MaxSteps: 200},
		{Name: "race-3-manager", Budget: 75 * time.Minute, Providers: []Provider{{Machine: "m1", Attempts: 1}, {Machine: "m2", Attempts: 1}, {Machine: "m3", Attempts: 1}},
			Reconciles: 1, ManagerViewDepth: 1, StaleReads: 1,
			Adversary: []EventKind{DeleteLock, RemoveRegister}, Events: 1, Losses: 1, MaxSteps: 400},
		{Name: "restore-unlock-2", Budget: 5 * time.Minute, Providers: []Provider{{Machine: "m1", Attempts: 1, Unlock: true}, {Machine: "m2", Attempts: 1}},
			Adversary: []EventKind{Backup, Restore}, Events: 2, MaxSteps: 200},
		{Name: "restore-relock-2", Budget: 10 * time.Minute, Providers: []Provider{{Machine: "m1", Attempts: 2, Relock: true, ViewDepth: 2}, {Machine: "m2", Attempts: 1}}, StaleReads: 1,
			Adversary: []EventKind{Backup, Restore}, Events: 2, MaxSteps: 200},
		{Name: "pause-loss", Budget: 15 * time.Minute, Providers: []Provider{{Machine: "m1", Attempts: 2, Relock: true}, {Machine: "m2", Attempts: 2}},
			Adversary: []EventKind{RemoveRegister, Pause, Unpause}, Events: 3, Losses: 1, MaxSteps: 200},
		{Name: "mixed-fleet-2", Providers: []Provider{{Machine: "m1", Upstream: true, Attempts: 2, Unlock: true}, {Machine: "m2", Attempts: 1, Unlock: true}},
			Reconciles: 1, Guard: true, Adversary: []EventKind{DeleteLock, Backup, Restore}, Events: 3, Losses: 1, MaxSteps: 300},
		{Name: "manager-among-providers", Providers: []Provider{{Machine: "m1", Attempts: 2, Unlock: true}, {Machine: "m2", Attempts: 1}},
			Reconciles: 2, ManagerViewDepth: 2, StaleReads: 1,
			Adversary: []EventKind{InitCompletes, DeleteLock, ReplaceCluster}, Events: 2, Losses: 1, MaxSteps: 200},
	}
}
