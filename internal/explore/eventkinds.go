package explore

import (
	"github.com/initlock/initlock/internal/kubeenv/faults"
)

// EventKind is a kind of adversary event: something that happens to the
// objects from outside the code under test. Each belongs to a fault class
// of the catalogue (eventClasses).
type EventKind string

// The adversary's events.
const (
	// DeleteLock: the lock ConfigMap is deleted (the garbage collector, or
	// an operator), with no precondition. A loss, when the lock guard
	// (Scenario.Guard) lets it through.
	DeleteLock EventKind = "delete-lock"
	// HoldDeletion: another controller puts its finalizer on the lock and
	// the lock, marked for release (as the lock guard wants it), is
	// deleted: it stays, being deleted, until FinalizerGone.
	HoldDeletion EventKind = "hold-deletion"
	// FinalizerGone: the other controller removes its finalizer from the
	// lock being deleted, which goes. A loss.
	FinalizerGone EventKind = "finalizer-gone"
	// RevertRegister: the Cluster's grant register goes back to an earlier
	// value (a Cluster restored from an older backup, a PUT of an old
	// copy). A loss.
	RevertRegister EventKind = "revert-register"
	// RemoveRegister: the register's annotation is removed. A loss.
	RemoveRegister EventKind = "remove-register"
	// RecreateMachine: a Machine is deleted and created again under its
	// name, with a new UID.
	RecreateMachine EventKind = "recreate-machine"
	// DeleteMachine: the upstream holder's Machine is deleted for good.
	DeleteMachine EventKind = "delete-machine"
	// MachineBack: the upstream holder's Machine, deleted, comes back under
	// its name (restored alone, or created again by a person or a tool):
	// the upstream record, which names it without a UID, names it again.
	MachineBack EventKind = "machine-back"
	// DeleteOwner: an owner the relinker's restored ConfigMap records
	// (Scenario.Relink) is deleted.
	DeleteOwner EventKind = "delete-owner"
	// DeleteCluster: the Cluster is deleted while Cluster API's finalizer
	// holds it (it deletes the Cluster's Machines first): it stays, being
	// deleted, to the end of the execution.
	DeleteCluster EventKind = "delete-cluster"
	// Pause and Unpause set and clear spec.paused.
	Pause   EventKind = "pause"
	Unpause EventKind = "unpause"
	// ReplaceCluster: the Cluster, its Machines and its lock are deleted,
	// and a new Cluster of the same name is created with new Machines.
	ReplaceCluster EventKind = "replace-cluster"
	// RestoreClusterFirst: as Restore, but the Machines are not restored
	// yet: the Cluster and the lock are back before them (a copy applied
	// in file order, a restore with another resource order, a partial
	// restore completed later).
	RestoreClusterFirst EventKind = "restore-cluster-first"
	// RestoreOverLock: the Cluster and its Machines are deleted (the lock
	// guard keeps the lock, the namespace stays), then restored from the
	// backup, the Machines left for later as RestoreClusterFirst does: the
	// restore leaves the existing lock as it is (Velero skips what exists),
	// so the lock is older than the Cluster restored around it.
	RestoreOverLock EventKind = "restore-over-lock"
	// MachinesRestored: the Machines RestoreClusterFirst or RestoreOverLock
	// left out are restored.
	MachinesRestored EventKind = "machines-restored"
	// ReshapeLock: a person or a tool takes the lock's cluster-name label
	// away, making it an ordinary ConfigMap, and deletes it. A loss, when
	// the lock guard lets the update through.
	ReshapeLock EventKind = "reshape-lock"
	// LeaveReleaseMark: the lock keeps its own release mark with no
	// release under way: a release stopped between its mark and its delete
	// (its releaser killed or cut off) and the Machine it named came back
	// since (a restore, a re-creation), or a person marked it by hand.
	LeaveReleaseMark EventKind = "leave-release-mark"
	// LeaveMoveMark: a clusterctl move that failed after marking the
	// source objects for deletion: the lock keeps delete-for-move.
	LeaveMoveMark EventKind = "leave-move-mark"
	// CollectLock: the garbage collector deletes the lock (an ownerReference
	// to a Cluster UID that does not exist, as a naive copy or a restore
	// leaves it), as kube-controller-manager sends it: the UID and the
	// resourceVersion it read as preconditions, a propagation policy, under
	// a user the lock guard does not know by name. A loss, when the lock
	// guard lets it through.
	CollectLock EventKind = "collect-lock"
	// InitCompletes: the control plane is initialised (only while a
	// Machine holds a grant).
	InitCompletes EventKind = "init-completes"
	// Backup: the namespace is backed up, every object as it stands (once
	// an execution).
	Backup EventKind = "backup"
	// RestoreUpdate: the backup is restored over the live objects with
	// Velero's --existing-resource-policy=update, as velerosim restores it
	// (checked against Velero): each object that exists is patched towards
	// its backed-up state and keeps its UID, so marks the backup holds come
	// back on the live lock; what does not exist is created.
	RestoreUpdate EventKind = "restore-update"
	// ApplyOldLock: an old manifest of an earlier lock of the same name
	// (another UID: a Cluster created again, a copy restored before) is
	// applied over the live lock, and its release mark, which names that
	// lock's UID, comes with it.
	ApplyOldLock EventKind = "apply-old-lock"
	// DeleteLockAtVersion: a script deletes the lock with the
	// resourceVersion it just read as a precondition and no propagation
	// policy, the shape of a release's delete, without marking the lock
	// first. A loss, when the lock guard lets it through.
	DeleteLockAtVersion EventKind = "delete-lock-at-version"
	// RestoreRewritten: the namespace is deleted and restored from the
	// backup as Restore does, with a resource modifier that writes the
	// lock's record with its key escaped ({"machine\u004eame":...}), which
	// every JSON decoder reads as machineName.
	RestoreRewritten EventKind = "restore-rewritten"
	// RestoreMachine: a Machine the backup holds is deleted and restored
	// alone from it, as a partial restore brings back a Machine deleted by
	// mistake: a new UID, its bootstrap data with it, while the Cluster,
	// its grant register and the lock stay as they are (Velero skips what
	// exists). A holder restored so is the holder still.
	RestoreMachine EventKind = "restore-machine"
	// Restore: the namespace is deleted and restored from the backup, as
	// Velero restores it (velerosim): every object created again with a new
	// UID, without ownerReferences and status, in Velero's order, in one
	// step.
	Restore EventKind = "restore"
)

// eventClasses are the fault classes of the events (internal/kubeenv/faults).
var eventClasses = map[EventKind]faults.Class{
	DeleteLock:          faults.LockDeleted,
	HoldDeletion:        faults.LockDeletionHeld,
	FinalizerGone:       faults.LockDeletionHeld,
	RevertRegister:      faults.RegisterReverted,
	RemoveRegister:      faults.RegisterRemoved,
	RecreateMachine:     faults.MachineRecreated,
	DeleteMachine:       faults.MachineDeleted,
	DeleteOwner:         faults.MachineDeleted,
	MachineBack:         faults.MachineRecreated,
	DeleteCluster:       faults.ClusterDeleted,
	Pause:               faults.Pause,
	Unpause:             faults.Pause,
	ReplaceCluster:      faults.ClusterReplaced,
	InitCompletes:       faults.InitCompletes,
	ReshapeLock:         faults.LockDeleted,
	CollectLock:         faults.LockCollected,
	LeaveReleaseMark:    faults.MarkLeft,
	LeaveMoveMark:       faults.MarkLeft,
	Backup:              faults.BackupRestore,
	Restore:             faults.BackupRestore,
	RestoreUpdate:       faults.BackupRestore,
	ApplyOldLock:        faults.BackupRestore,
	RestoreRewritten:    faults.BackupRestore,
	RestoreMachine:      faults.BackupRestore,
	DeleteLockAtVersion: faults.LockDeleted,
	RestoreClusterFirst: faults.BackupRestore,
	RestoreOverLock:     faults.BackupRestore,
	MachinesRestored:    faults.BackupRestore,
}
