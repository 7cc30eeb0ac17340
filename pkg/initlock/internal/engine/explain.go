package engine

import (
	"fmt"
	"time"
)

// Explain says, in one sentence for a person, why Decide decided d on o
// under p: what d's write does and why, or, when d writes nothing, why a
// lock is left as it is for now (d.Wait). It names no UID and no time of
// day except where one is the point, so that the same fleet is explained
// in the same words. A decision that leaves the lock to a person
// (WaitPerson) is explained by what the person has to resolve, whatever
// else it writes. kubectl initlock prints it.
func Explain(o Observation, d Decision, p Policy) string {
	if d.Action == ActionNone || d.Action == "" || d.Wait == WaitPerson {
		return explainWait(o, d)
	}
	return explainChange(o, d, p)
}

func explainChange(o Observation, d Decision, p Policy) string {
	switch d.Action {
	case ActionAdopt:
		switch d.Owner {
		case OwnerMissing:
			return "no ownerReference to its Cluster (as after a restore): point it at the Cluster"
		case OwnerStaleUID:
			return "ownerReference to an old UID of its Cluster (as after a restore or move): point it at the current one"
		case OwnerWrongCluster:
			return "ownerReference to another Cluster: point it at its own"
		}
		return "stale cluster-absent mark: the Cluster exists again; drop the mark"
	case ActionUnmark:
		if o.Lock != nil && o.Lock.MoveMark {
			return "delete-for-move left by a clusterctl move that stopped half-way (the Cluster is not paused): drop it, so that the lock guard holds the lock again"
		}
		return "release mark left with no release under way (a release cut off): drop it, so that the lock guard holds the lock again"
	case ActionRelease:
		switch d.Reason {
		case ReasonClusterDeleting:
			return "Cluster is being deleted and no Machine the lock or its grant names exists: mark the lock for release and delete it (the admission policy refuses the garbage collector's delete)"
		case ReasonHolderGone:
			return fmt.Sprintf("holder machine %q does not exist and no grant protects another machine: mark the lock for release and delete it, so that the next machine may take it", d.Holder)
		}
		return "control plane initialised: the lock has done its job; mark it for release and delete it (--release-after-init)"
	case ActionMarkOrphan:
		unmark := ""
		if d.Unmark {
			unmark = ", dropping the mark left on it that lets anyone delete it"
		}
		return fmt.Sprintf("Cluster not found: mark the lock now%s; a repair run %s or more later (--orphan-grace) collects it if the Cluster is still missing and the holder is gone", unmark, p.OrphanGrace)
	case ActionCollect:
		return fmt.Sprintf("Cluster missing since %s, longer than %s, and holder gone: delete the lock", absentSince(o), p.OrphanGrace)
	}
	return string(d.Action)
}

func explainWait(o Observation, d Decision) string {
	switch d.Wait {
	case WaitPaused:
		return "cluster is paused (a move or restore may be in progress): unpause it and run repair again"
	case WaitHolder:
		if o.Cluster != nil {
			return fmt.Sprintf("Cluster is being deleted, but machine %q, which the lock or its grant names, exists: released once Cluster API has deleted it", d.Holder)
		}
		return fmt.Sprintf("Cluster missing since %s, but holder machine %q exists (a restore may still be bringing the Cluster back): looked at again by later repairs; 'kubectl initlock release' removes it", absentSince(o), d.Holder)
	case WaitSettle:
		return fmt.Sprintf("Cluster not found, only just: its absence is recorded on the lock from %s on, if the Cluster is still missing then (--orphan-settle)", d.WaitUntil.UTC().Format(time.RFC3339))
	case WaitGrace:
		return fmt.Sprintf("Cluster missing since %s: a repair from %s on collects it", absentSince(o), d.WaitUntil.UTC().Format(time.RFC3339))
	case WaitHolderRestore:
		return fmt.Sprintf("holder machine %q does not exist, but the lock or its Cluster is younger than the grace period (a restore may bring the Cluster and the lock back before the machines): a repair from %s on releases it if the machine is still gone", d.Holder, d.WaitUntil.UTC().Format(time.RFC3339))
	case WaitLockRecreated:
		return fmt.Sprintf("lock deleted while machine %q holds the grant: the bootstrap provider recreates it for that machine at its next lock attempt", d.Holder)
	case WaitTakeOver:
		return fmt.Sprintf("holder machine %q does not exist, and the Cluster's grant register names another machine: the next lock attempt of a provider using initlock hands the lock to that machine", d.Holder)
	case WaitDeleting:
		return "being deleted, held back by another controller's finalizer: it counts as held by its holder until it is gone"
	case WaitPerson:
		if d.Err != nil {
			return d.Err.Error()
		}
		return "the lock and the Cluster's grant register name two different existing machines"
	}
	return string(d.Wait)
}

// absentSince is since when the lock's mark says its Cluster is missing,
// "-" when it carries no mark.
func absentSince(o Observation) string {
	if o.Lock == nil || o.Lock.ClusterAbsentSince == nil {
		return "-"
	}
	return o.Lock.ClusterAbsentSince.UTC().Format(time.RFC3339)
}
