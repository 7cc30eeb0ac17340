package cli

import (
	"fmt"
	"io"
	"strings"

	"github.com/initlock/initlock/pkg/initlock/keeper"
)

// waitingWhy renders why a lock is left as it is for now: no installed
// manager acts on it, or the decision waits (keeper.Status.Why).
func waitingWhy(r row) string {
	if r.unhandled != "" {
		return fmt.Sprintf("%s: %s is left to whoever handles it; --release-after-init and --orphan-grace together make repair act on it", r.unhandled, r.status().Action)
	}
	return r.status().Why
}

// humanWhy renders what a person has to do about a lock the decision
// leaves to one, with the release command and, when the release needs
// it, --force.
func humanWhy(r row) string {
	s := r.status()
	ns, cluster, lock := r.entry.Namespace, r.entry.ClusterName, r.entry.LockName
	if s.Verdict == "foreign" {
		return fmt.Sprintf("configmap %q is %v; refusing to touch it. Rename or delete it if nothing uses it, or rename the cluster", lock, s.Err)
	}
	force := ""
	if s.ReleaseNeedsForce {
		force = " --force"
	}
	return fmt.Sprintf("%s; it is never taken over silently. Once no machine of the cluster is running kubeadm init: kubectl initlock release %s -n %s%s",
		s.Why, cluster, ns, force)
}

func printPlan(w io.Writer, p planned, policy keeper.Policy) error {
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
				return []string{r.status().Action, r.status().Why}
			}},
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
			t.row(append([]string{r.entry.Namespace, r.entry.ClusterName, r.entry.LockName, r.status().Verdict}, s.cells(r)...)...)
		}
		if err := t.flush(); err != nil {
			return err
		}
	}
	return nil
}

func printSummary(w io.Writer, done map[string]int, failed, human int, policy keeper.Policy) {
	var parts []string
	for _, a := range []string{"adopt", "unmark", "release", "mark-orphan", "collect", "none"} {
		if n := done[a]; n > 0 {
			parts = append(parts, fmt.Sprintf("%d %s", n, pastTense(a)))
		}
	}
	if len(parts) == 0 {
		parts = append(parts, "nothing changed")
	}
	_, _ = fmt.Fprintf(w, "\nDone: %s; %d failed.\n", strings.Join(parts, ", "), failed)
	if done["mark-orphan"] > 0 {
		_, _ = fmt.Fprintf(w, "Marked orphan locks are collected by a repair run %s or more from now, if their Cluster is still missing.\n", policy.OrphanGrace)
	}
	if human > 0 {
		_, _ = fmt.Fprintf(w, "%d %s a person: see above.\n", human, plural(human, "lock needs", "locks need"))
	}
}

func pastTense(a string) string {
	switch a {
	case "adopt":
		return "adopted"
	case "unmark":
		return "unmarked"
	case "release":
		return "released"
	case "mark-orphan":
		return "marked"
	case "collect":
		return "collected"
	case "none":
		return "unchanged"
	}
	return a
}

func plural(n int, one, many string) string {
	if n == 1 {
		return one
	}
	return many
}
