package cli

import (
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/initlock/initlock/pkg/initlock"
	"github.com/initlock/initlock/pkg/initlock/engine"
)

// Texts of the plan. They name no UIDs or times of day except where they are
// the point, so that the same fleet gives the same plan.

func changeWhy(r row, p engine.Policy) string {
	d, o := r.decision, r.entry.Observation
	switch d.Action {
	case engine.ActionAdopt:
		switch d.Owner {
		case engine.OwnerMissing:
			return "no ownerReference to its Cluster (as after a restore): point it at the Cluster"
		case engine.OwnerStaleUID:
			return "ownerReference to an old UID of its Cluster (as after a restore or move): point it at the current one"
		case engine.OwnerWrongCluster:
			return "ownerReference to another Cluster: point it at its own"
		}
		return "stale cluster-absent mark: the Cluster exists again; drop the mark"
	case engine.ActionUnmark:
		if o.Lock.MoveMark {
			return "delete-for-move left by a clusterctl move that stopped half-way (the Cluster is not paused): drop it, so that the lock guard holds the lock again"
		}
		return "release mark left with no release under way (a release cut off): drop it, so that the lock guard holds the lock again"
	case engine.ActionRelease:
		switch d.Reason {
		case engine.ReasonClusterDeleting:
			return "Cluster is being deleted and no Machine the lock or its grant names exists: mark the lock for release and delete it (the admission policy refuses the garbage collector's delete)"
		case engine.ReasonHolderGone:
			return fmt.Sprintf("holder machine %q does not exist and no grant protects another machine: mark the lock for release and delete it, so that the next machine may take it", d.Holder)
		}
		return "control plane initialised: the lock has done its job; mark it for release and delete it (--release-after-init)"
	case engine.ActionMarkOrphan:
		unmark := ""
		if d.Unmark {
			unmark = ", dropping the mark left on it that lets anyone delete it"
		}
		return fmt.Sprintf("Cluster not found: mark the lock now%s; a repair run %s or more later (--orphan-grace) collects it if the Cluster is still missing and the holder is gone", unmark, p.OrphanGrace)
	case engine.ActionCollect:
		since := "-"
		if o.Lock != nil && o.Lock.ClusterAbsentSince != nil {
			since = o.Lock.ClusterAbsentSince.UTC().Format(time.RFC3339)
		}
		return fmt.Sprintf("Cluster missing since %s, longer than %s, and holder gone: delete the lock", since, p.OrphanGrace)
	}
	return string(d.Action)
}

// waitingWhy renders why Decide leaves a lock that is not healthy as it is
// for now.
func waitingWhy(r row) string {
	if r.unhandled != "" {
		return fmt.Sprintf("%s: %s is left to whoever handles it; --release-after-init and --orphan-grace together make repair act on it", r.unhandled, r.decision.Action)
	}
	d, o := r.decision, r.entry.Observation
	since := "-"
	if o.Lock != nil && o.Lock.ClusterAbsentSince != nil {
		since = o.Lock.ClusterAbsentSince.UTC().Format(time.RFC3339)
	}
	switch d.Wait {
	case engine.WaitPaused:
		return "cluster is paused (a move or restore may be in progress): unpause it and run repair again"
	case engine.WaitHolder:
		if o.Cluster != nil {
			return fmt.Sprintf("Cluster is being deleted, but machine %q, which the lock or its grant names, exists: released once Cluster API has deleted it", d.Holder)
		}
		return fmt.Sprintf("Cluster missing since %s, but holder machine %q exists (a restore may still be bringing the Cluster back): looked at again by later repairs; 'kubectl initlock release' removes it", since, d.Holder)
	case engine.WaitGrace:
		return fmt.Sprintf("Cluster missing since %s: a repair from %s on collects it", since, d.WaitUntil.UTC().Format(time.RFC3339))
	case engine.WaitHolderRestore:
		return fmt.Sprintf("holder machine %q does not exist, but the lock or its Cluster is younger than the grace period (a restore may bring the Cluster and the lock back before the machines): a repair from %s on releases it if the machine is still gone", d.Holder, d.WaitUntil.UTC().Format(time.RFC3339))
	case engine.WaitLockRecreated:
		return fmt.Sprintf("lock deleted while machine %q holds the grant: the bootstrap provider recreates it for that machine at its next lock attempt", d.Holder)
	case engine.WaitTakeOver:
		return fmt.Sprintf("holder machine %q does not exist, and the Cluster's grant register names another machine: the next lock attempt of a provider using initlock hands the lock to that machine", d.Holder)
	case engine.WaitDeleting:
		return "being deleted, held back by another controller's finalizer: it counts as held by its holder until it is gone"
	}
	return string(d.Wait)
}

// humanWhy renders what a person has to do about a lock Decide leaves to
// one, with the release command and, when Decide says the release needs
// it, --force.
func humanWhy(r row) string {
	d := r.decision
	ns, cluster, lock := r.entry.Namespace, r.entry.ClusterName, r.entry.LockName
	if d.Verdict == engine.VerdictForeign {
		return fmt.Sprintf("configmap %q is %v; refusing to touch it. Rename or delete it if nothing uses it, or rename the cluster", lock, d.Err)
	}
	rel := r.entry.Observation
	rel.Intent = engine.IntentRelease
	force := ""
	if engine.Decide(rel, engine.Policy{}, time.Time{}).NeedsForce {
		force = " --force"
	}
	problem := "the lock and the Cluster's grant register name two different existing machines"
	if d.Err != nil {
		problem = d.Err.Error()
	}
	return fmt.Sprintf("%s; it is never taken over silently. Once no machine of the cluster is running kubeadm init: kubectl initlock release %s -n %s%s",
		problem, cluster, ns, force)
}

func printPlan(w io.Writer, p planned, policy engine.Policy, now time.Time) error {
	after := "kept"
	if policy.ReleaseAfterInit {
		after = "released"
	}
	_, _ = fmt.Fprintf(w, "Policy: locks are %s once the control plane is initialised; orphan locks are collected %s after a repair marks them.\n", after, policy.OrphanGrace)
	if len(p.changes) == 0 {
		_, _ = fmt.Fprintln(w, "\nNothing to change.")
	}
	sections := []struct {
		title string
		rows  []row
		last  []string
		cells func(row) []string
	}{
		{"Planned changes", p.changes, []string{"ACTION", "WHY"},
			func(r row) []string { return []string{string(r.decision.Action), changeWhy(r, policy)} }},
		{"Left as they are for now", p.waiting, []string{"WHY"},
			func(r row) []string { return []string{waitingWhy(r)} }},
		{"Need a person", p.human, []string{"WHAT TO DO"},
			func(r row) []string { return []string{humanWhy(r)} }},
	}
	for _, s := range sections {
		if len(s.rows) == 0 {
			continue
		}
		_, _ = fmt.Fprintf(w, "\n%s (%d):\n", s.title, len(s.rows))
		t := newTable(w, false)
		t.row(append([]string{"NAMESPACE", "CLUSTER", "LOCK", "VERDICT"}, s.last...)...)
		for _, r := range s.rows {
			t.row(append([]string{r.entry.Namespace, r.entry.ClusterName, r.entry.LockName, string(r.decision.Verdict)}, s.cells(r)...)...)
		}
		if err := t.flush(); err != nil {
			return err
		}
	}
	return nil
}

func printSummary(w io.Writer, done map[initlock.Action]int, failed, human int, policy engine.Policy) {
	var parts []string
	for _, a := range []initlock.Action{engine.ActionAdopt, engine.ActionUnmark, engine.ActionRelease, engine.ActionMarkOrphan, engine.ActionCollect, engine.ActionNone} {
		if n := done[a]; n > 0 {
			parts = append(parts, fmt.Sprintf("%d %s", n, pastTense(a)))
		}
	}
	if len(parts) == 0 {
		parts = append(parts, "nothing changed")
	}
	_, _ = fmt.Fprintf(w, "\nDone: %s; %d failed.\n", strings.Join(parts, ", "), failed)
	if done[engine.ActionMarkOrphan] > 0 {
		_, _ = fmt.Fprintf(w, "Marked orphan locks are collected by a repair run %s or more from now, if their Cluster is still missing.\n", policy.OrphanGrace)
	}
	if human > 0 {
		_, _ = fmt.Fprintf(w, "%d %s a person: see above.\n", human, plural(human, "lock needs", "locks need"))
	}
}

func pastTense(a initlock.Action) string {
	switch a {
	case engine.ActionAdopt:
		return "adopted"
	case engine.ActionUnmark:
		return "unmarked"
	case engine.ActionRelease:
		return "released"
	case engine.ActionMarkOrphan:
		return "marked"
	case engine.ActionCollect:
		return "collected"
	case engine.ActionNone:
		return "unchanged"
	}
	return string(a)
}

func plural(n int, one, many string) string {
	if n == 1 {
		return one
	}
	return many
}
