package cli

import (
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/initlock/initlock/pkg/initlock"
	"github.com/initlock/initlock/pkg/initlock/engine"
)

// waitingWhy renders why a lock is left as it is for now: no installed
// manager acts on it, or Decide waits (engine.Explain).
func waitingWhy(r row, p engine.Policy) string {
	if r.unhandled != "" {
		return fmt.Sprintf("%s: %s is left to whoever handles it; --release-after-init and --orphan-grace together make repair act on it", r.unhandled, r.decision.Action)
	}
	return engine.Explain(r.entry.Observation, r.decision, p)
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
	problem := engine.Explain(r.entry.Observation, d, engine.Policy{})
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
			func(r row) []string {
				return []string{string(r.decision.Action), engine.Explain(r.entry.Observation, r.decision, policy)}
			}},
		{"Left as they are for now", p.waiting, []string{"WHY"},
			func(r row) []string { return []string{waitingWhy(r, policy)} }},
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
