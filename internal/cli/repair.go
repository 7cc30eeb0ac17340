package cli

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/spf13/cobra"
	apierrors "k8s.io/apimachinery/pkg/api/errors"

	"github.com/initlock/initlock/internal/cli/inventory"
	"github.com/initlock/initlock/pkg/initlock"
	"github.com/initlock/initlock/pkg/initlock/engine"
)

// maxApplyAttempts bounds the observe-decide-apply rounds for one lock
// when it keeps changing under repair.
const maxApplyAttempts = 5

const (
	dryRunNone   = "none"
	dryRunClient = "client"
)

type repairOptions struct {
	allNamespaces bool
	dryRun        string
	yes           bool
	policy        policyFlags
}

func (a *app) newRepairCommand() *cobra.Command {
	o := &repairOptions{}
	cmd := &cobra.Command{
		Use:   "repair [-n NAMESPACE | -A] [--dry-run=client|none] [--yes]",
		Short: "Repair the init locks that need it",
		Long: `Repair computes, for every init lock in scope, the action the initlock manager
would take (the same decision function), prints the plan and applies it: it
re-adopts locks whose Cluster ownerReference is missing or stale (after a Velero
restore or a move), releases locks held after the control plane is initialised
(--release-after-init), and collects locks whose Cluster is gone.

Orphans are collected in two steps. A first repair marks the lock with the time
its Cluster was found missing (annotation initlock.dev/cluster-absent-since); a
repair run --orphan-grace or more later deletes it, if the Cluster is still
missing and the holder Machine is gone. A restore that brings the Cluster back
in between makes the next repair re-adopt the lock instead.

Every write is one request with preconditions (resourceVersion, or UID and
resourceVersion for deletes). A lock that changed meanwhile is observed and
decided again, up to 5 times. Repair never deletes a lock whose holder Machine
exists on a Cluster whose control plane is not initialised, and never touches a
corrupt lock or a ConfigMap that is not a lock.

On a terminal, repair asks for confirmation unless --yes is given, and shows a
progress bar for large fleets.

Exit codes: 0 when every lock is healthy or was repaired, 1 on error, 2 when
locks remain that need a person (corrupt, or a foreign ConfigMap in the way).`,
		Example: `  kubectl initlock repair -A --dry-run=client
  kubectl initlock repair -n capi-clusters --yes
  kubectl initlock repair -A --release-after-init=false`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return a.runRepair(cmd, o)
		},
	}
	fs := cmd.Flags()
	fs.BoolVarP(&o.allNamespaces, "all-namespaces", "A", false, "Repair the locks in all namespaces.")
	fs.StringVar(&o.dryRun, "dry-run", dryRunNone, `"client" prints the plan and changes nothing; "none" applies it.`)
	fs.Lookup("dry-run").NoOptDefVal = dryRunClient
	fs.BoolVarP(&o.yes, "yes", "y", false, "Apply without asking for confirmation on a terminal.")
	o.policy.add(fs)
	return cmd
}

// planned sorts rows into what repair does, what it leaves for a person and
// what it leaves for later.
type planned struct {
	changes, human, waiting []row
}

func plan(rows []row) planned {
	var p planned
	for _, r := range rows {
		d := r.decision
		switch {
		case d.Wait == engine.WaitPerson:
			p.human = append(p.human, r)
		case d.Err == nil && d.Action != engine.ActionNone:
			p.changes = append(p.changes, r)
		case d.Wait != engine.WaitNone && (d.Verdict != engine.VerdictHealthy || d.Wait == engine.WaitDeleting):
			p.waiting = append(p.waiting, r)
		}
	}
	return p
}

func (a *app) runRepair(cmd *cobra.Command, o *repairOptions) error {
	switch o.dryRun {
	case dryRunNone, dryRunClient:
	case "server":
		return errors.New(`--dry-run=server is not supported: use --dry-run=client to print the plan`)
	default:
		return fmt.Errorf("invalid --dry-run value %q: use client or none", o.dryRun)
	}
	ns, err := a.namespace(o.allNamespaces)
	if err != nil {
		return err
	}
	conn, err := a.connect()
	if err != nil {
		return err
	}
	ctx := cmd.Context()
	used, err := a.managerPolicy(ctx, cmd, conn, &o.policy)
	if err != nil {
		return err
	}
	used.report(a)
	policy := used.Policy
	inv, err := inventory.Gather(ctx, conn.client, inventory.Options{Namespace: ns, CAPIVersion: conn.capiVersion})
	if err != nil {
		return err
	}
	now := a.clock.Now()
	p := plan(decideAll(inv, policy, now))
	out := cmd.OutOrStdout()
	if err := printPlan(out, p, policy, now); err != nil {
		return err
	}
	needsHuman := func() error {
		if len(p.human) > 0 {
			return &ExitCodeError{Code: ExitNeedsHuman}
		}
		return nil
	}
	if len(p.changes) == 0 {
		return needsHuman()
	}
	if o.dryRun == dryRunClient {
		_, _ = fmt.Fprintln(out, "\nDry run: nothing was changed.")
		return needsHuman()
	}
	if !o.yes && a.opts.IsTerminal(a.opts.IOStreams.In) && a.opts.IsTerminal(out) {
		ok, err := confirm(a.opts.IOStreams.In, out, fmt.Sprintf("\nApply %d %s? [y/N]: ", len(p.changes), plural(len(p.changes), "change", "changes")))
		if err != nil {
			return err
		}
		if !ok {
			return &ExitCodeError{Code: ExitError, Err: errors.New("repair aborted; nothing was changed")}
		}
	}

	errOut := a.opts.IOStreams.ErrOut
	var bar *progressBar
	if len(p.changes) >= a.opts.ProgressThreshold && a.opts.IsTerminal(errOut) {
		bar = newProgressBar(errOut, len(p.changes))
	} else {
		_, _ = fmt.Fprintln(out)
	}
	done := map[initlock.Action]int{}
	var errs []error
	for _, r := range p.changes {
		if err := ctx.Err(); err != nil {
			errs = append(errs, fmt.Errorf("interrupted: %w", err))
			break
		}
		res, err := a.repairOne(ctx, conn, r, policy)
		if err != nil {
			errs = append(errs, err)
		} else {
			done[res.action]++
		}
		if bar != nil {
			bar.step()
			if err != nil {
				bar.printAbove(fmt.Sprintf("error: %v", err))
			}
			continue
		}
		if err != nil {
			_, _ = fmt.Fprintf(out, "failed      %s/%s: %v\n", r.entry.Namespace, r.entry.LockName, err)
			continue
		}
		_, _ = fmt.Fprintf(out, "%-11s %s/%s%s\n", pastTense(res.action), r.entry.Namespace, r.entry.LockName, res.note)
	}
	if bar != nil {
		bar.finish()
	}
	printSummary(out, done, len(errs), len(p.human), policy)
	if len(errs) > 0 {
		return &ExitCodeError{Code: ExitError, Err: errors.Join(errs...)}
	}
	return needsHuman()
}

type repairResult struct {
	action initlock.Action
	note   string
}

// repairOne applies r's decision, once engine.Confirm has checked it
// against the Cluster as it is now (the plan may be minutes old). When the
// lock changed since it was observed (a conflict or a missing object), it
// observes that lock again, decides again and applies the new decision, a
// bounded number of times.
func (a *app) repairOne(ctx context.Context, conn *connection, r row, policy engine.Policy) (repairResult, error) {
	first := r.decision.Action
	for attempt := 1; ; attempt++ {
		now := a.clock.Now()
		obs, d, err := engine.Confirm(ctx, conn.client, r.entry.Observation, r.decision, policy, now)
		if err != nil {
			return repairResult{}, err
		}
		if d.Action != r.decision.Action {
			return repairResult{action: engine.ActionNone, note: fmt.Sprintf(" (the Cluster had changed; now %s, nothing to do)", d.Verdict)}, nil
		}
		err = engine.Apply(ctx, conn.client, r.entry.ConfigMap, obs, d, now)
		if err == nil {
			res := repairResult{action: r.decision.Action}
			if res.action != first {
				res.note = fmt.Sprintf(" (the lock had changed; %s instead of %s)", res.action, first)
			}
			return res, nil
		}
		if apierrors.IsForbidden(err) {
			verb := "patch"
			if r.decision.Action == engine.ActionRelease || r.decision.Action == engine.ActionCollect {
				verb = "delete"
			}
			return repairResult{}, fmt.Errorf("namespace %q: configmap %q: %s: permission denied: kubectl-initlock needs %q on \"configmaps\" in namespace %q; ask an administrator to grant it, or run 'kubectl initlock repair --dry-run=client' to see the plan only: %w",
				r.entry.Namespace, r.entry.LockName, r.decision.Action, verb, r.entry.Namespace, err)
		}
		if !apierrors.IsConflict(err) && !apierrors.IsNotFound(err) {
			return repairResult{}, fmt.Errorf("namespace %q: configmap %q: %s: %w", r.entry.Namespace, r.entry.LockName, r.decision.Action, err)
		}
		if attempt == maxApplyAttempts {
			return repairResult{}, fmt.Errorf("namespace %q: configmap %q: %s: the lock changed %d times in a row while repairing it; run repair again: %w",
				r.entry.Namespace, r.entry.LockName, r.decision.Action, attempt, err)
		}
		e, oerr := inventory.Observe(ctx, conn.client, conn.capiVersion, r.entry.Namespace, r.entry.ClusterName)
		if oerr != nil {
			return repairResult{}, oerr
		}
		d = engine.Decide(e.Observation, policy, a.clock.Now())
		if d.Err != nil || d.Action == engine.ActionNone {
			return repairResult{action: engine.ActionNone, note: fmt.Sprintf(" (the lock had changed; now %s, nothing to do)", d.Verdict)}, nil
		}
		r = row{entry: e, decision: d}
	}
}

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
	case engine.ActionRelease:
		switch d.Reason {
		case engine.ReasonClusterDeleting:
			return "Cluster is being deleted: mark the lock for release and delete it (the admission policy refuses the garbage collector's delete)"
		case engine.ReasonHolderGone:
			return fmt.Sprintf("holder machine %q does not exist and no grant protects another machine: mark the lock for release and delete it, so that the next machine may take it", d.Holder)
		}
		return "control plane initialised: the lock has done its job; mark it for release and delete it (--release-after-init)"
	case engine.ActionMarkOrphan:
		return fmt.Sprintf("Cluster not found: mark the lock now; a repair run %s or more later (--orphan-grace) collects it if the Cluster is still missing and the holder is gone", p.OrphanGrace)
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
	d, o := r.decision, r.entry.Observation
	since := "-"
	if o.Lock != nil && o.Lock.ClusterAbsentSince != nil {
		since = o.Lock.ClusterAbsentSince.UTC().Format(time.RFC3339)
	}
	switch d.Wait {
	case engine.WaitPaused:
		return "cluster is paused (a move or restore may be in progress): unpause it and run repair again"
	case engine.WaitHolder:
		if o.Cluster != nil && o.Cluster.Deleting {
			return fmt.Sprintf("Cluster is being deleted, but holder machine %q, or a machine the grant register names, exists (Cluster API deletes the machines first): released once it is gone", d.Holder)
		}
		return fmt.Sprintf("Cluster missing since %s, but holder machine %q exists (a restore may still be bringing the Cluster back): looked at again by later repairs; 'kubectl initlock release' removes it", since, d.Holder)
	case engine.WaitGrace:
		return fmt.Sprintf("Cluster missing since %s: a repair from %s on collects it", since, d.WaitUntil.UTC().Format(time.RFC3339))
	case engine.WaitHolderRestore:
		return fmt.Sprintf("holder machine %q does not exist, but the lock is younger than the grace period (a restore may bring the Cluster and the lock back before the machines): a repair from %s on releases it if the machine is still gone", d.Holder, d.WaitUntil.UTC().Format(time.RFC3339))
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
	} else {
		_, _ = fmt.Fprintf(w, "\nPlanned changes (%d):\n", len(p.changes))
		t := newTable(w, false)
		t.row("NAMESPACE", "CLUSTER", "LOCK", "VERDICT", "ACTION", "WHY")
		for _, r := range p.changes {
			t.row(r.entry.Namespace, r.entry.ClusterName, r.entry.LockName, string(r.decision.Verdict), string(r.decision.Action), changeWhy(r, policy))
		}
		if err := t.flush(); err != nil {
			return err
		}
	}
	if len(p.waiting) > 0 {
		_, _ = fmt.Fprintf(w, "\nLeft as they are for now (%d):\n", len(p.waiting))
		t := newTable(w, false)
		t.row("NAMESPACE", "CLUSTER", "LOCK", "VERDICT", "WHY")
		for _, r := range p.waiting {
			t.row(r.entry.Namespace, r.entry.ClusterName, r.entry.LockName, string(r.decision.Verdict), waitingWhy(r))
		}
		if err := t.flush(); err != nil {
			return err
		}
	}
	if len(p.human) > 0 {
		_, _ = fmt.Fprintf(w, "\nNeed a person (%d):\n", len(p.human))
		t := newTable(w, false)
		t.row("NAMESPACE", "CLUSTER", "LOCK", "VERDICT", "WHAT TO DO")
		for _, r := range p.human {
			t.row(r.entry.Namespace, r.entry.ClusterName, r.entry.LockName, string(r.decision.Verdict), humanWhy(r))
		}
		if err := t.flush(); err != nil {
			return err
		}
	}
	return nil
}

func printSummary(w io.Writer, done map[initlock.Action]int, failed, human int, policy engine.Policy) {
	var parts []string
	for _, a := range []initlock.Action{engine.ActionAdopt, engine.ActionRelease, engine.ActionMarkOrphan, engine.ActionCollect, engine.ActionNone} {
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

// confirm asks a yes/no question; only "y" or "yes" is yes.
func confirm(in io.Reader, out io.Writer, question string) (bool, error) {
	if _, err := fmt.Fprint(out, question); err != nil {
		return false, err
	}
	line, err := bufio.NewReader(in).ReadString('\n')
	if err != nil && !errors.Is(err, io.EOF) {
		return false, fmt.Errorf("reading the answer: %w", err)
	}
	switch strings.ToLower(strings.TrimSpace(line)) {
	case "y", "yes":
		return true, nil
	}
	return false, nil
}
