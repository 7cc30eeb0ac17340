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
	scope  scopeFlags
	dryRun string
	yes    bool
	policy policyFlags
}

func (a *app) newRepairCommand() *cobra.Command {
	o := &repairOptions{}
	cmd := &cobra.Command{
		Use:   "repair [CLUSTER] [-n NAMESPACE | -A] [-l SELECTOR] [--dry-run=client|none] [--yes]",
		Short: "Repair the init locks that need it",
		Long: `Repair computes, for every init lock in scope (or only CLUSTER's), the action
the installed initlock-manager takes (the same decision function, with the
manager's settings read from its Deployment, as list -o wide shows them),
prints the plan, asks for confirmation and applies it.

What it changes:
  - adopt: points the ownerReference of a lock at its Cluster's current UID
    (missing, stale or wrong after a Velero restore or a move), and drops a
    stale cluster-absent mark;
  - mark-orphan: records on a lock whose Cluster is missing since when
    (annotation initlock.dev/cluster-absent-since);
  - protect: puts initlock-manager's finalizer initlock.dev/held on a lock
    held by an existing Machine of an uninitialised Cluster (adopting it in
    the same patch), only when an installed initlock-manager protects locks
    (it runs without --protect=false) and so takes the finalizer off later.

What it lets go, each with UID and resourceVersion preconditions:
  - release: deletes the lock of a Cluster whose control plane is
    initialised (unless --release-after-init=false), and the lock of a
    Cluster being deleted that does not own it (the garbage collector would
    leave it);
  - collect: deletes a lock whose Cluster has been missing for
    --orphan-grace since a first repair marked it, once its holder Machine
    is gone too;
  - unprotect: removes initlock-manager's finalizer initlock.dev/held, and
    only that finalizer, from a lock once it is safe to let it go: its
    control plane is initialised, its Cluster is being deleted, or, for a
    lock being deleted, its holder Machine is gone.

What it never lets go: a lock whose holder Machine exists while the control
plane is not initialised (kubeadm init may be running: only 'kubectl
initlock release --force' releases it), a corrupt lock, a ConfigMap that is
not a lock, and anything of a paused Cluster; these are listed with the way
out. A lock that changed since it was read is read and decided again, up to
5 times.

Repair asks before applying, whether its output is a terminal or not, unless
--yes is given; with no answer (standard input closed) it changes nothing.
It shows a progress bar on a terminal for large fleets.

Exit codes: 0 when every lock is healthy or was repaired, 1 on error, 2 when
locks remain that need a person (corrupt, or a foreign ConfigMap in the way).`,
		Example: `  kubectl initlock repair -A --dry-run=client
  kubectl initlock repair my-cluster -n capi-clusters
  kubectl initlock repair -n capi-clusters --yes
  kubectl initlock repair -A -l env=prod --release-after-init=false`,
		Args: cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := o.scope.parse(args); err != nil {
				return err
			}
			return a.runRepair(cmd, o)
		},
	}
	fs := cmd.Flags()
	o.scope.add(fs, "Repair")
	fs.StringVar(&o.dryRun, "dry-run", dryRunNone, `"client" prints the plan and changes nothing; "none" applies it.`)
	fs.Lookup("dry-run").NoOptDefVal = dryRunClient
	fs.BoolVarP(&o.yes, "yes", "y", false, "Apply without asking for confirmation.")
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
		case r.unhandled != "" && d.Action != engine.ActionNone:
			p.waiting = append(p.waiting, r)
		case d.Err == nil && d.Action != engine.ActionNone:
			p.changes = append(p.changes, r)
		case d.Wait != engine.WaitNone && (d.Verdict != engine.VerdictHealthy || d.Wait == engine.WaitHeld):
			p.waiting = append(p.waiting, r)
		}
	}
	return p
}

// validDryRun checks a --dry-run value.
func validDryRun(v string) error {
	switch v {
	case dryRunNone, dryRunClient:
		return nil
	case "server":
		return errors.New(`--dry-run=server is not supported: use --dry-run=client to see what would change`)
	}
	return fmt.Errorf("invalid --dry-run value %q: use client or none", v)
}

func (a *app) runRepair(cmd *cobra.Command, o *repairOptions) error {
	if err := validDryRun(o.dryRun); err != nil {
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
	_, inv, err := a.gather(cmd, conn, &o.scope)
	if err != nil {
		return err
	}
	now := a.clock.Now()
	rows := decideAll(inv, used, now)
	if o.scope.cluster != "" {
		if rows, err = onlyCluster(rows, o.scope.cluster); err != nil {
			return err
		}
	}
	p := plan(rows)
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
	if !o.yes {
		ok, err := a.confirm(fmt.Sprintf("\nApply %d %s? [y/N]: ", len(p.changes), plural(len(p.changes), "change", "changes")))
		if err != nil {
			return err
		}
		if !ok {
			return &ExitCodeError{Code: ExitError, Err: errors.New("repair aborted; nothing was changed (--yes applies without asking)")}
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
		if d.Reason == engine.ReasonClusterDeleting {
			return "Cluster is being deleted and does not own the lock, so the garbage collector would leave it: delete it"
		}
		return "control plane initialised: the lock has done its job; delete it (--release-after-init)"
	case engine.ActionMarkOrphan:
		return fmt.Sprintf("Cluster not found: mark the lock now; a repair run %s or more later (--orphan-grace) collects it if the Cluster is still missing and the holder is gone", p.OrphanGrace)
	case engine.ActionUnprotect:
		return fmt.Sprintf("being deleted, kept by finalizer %s, and safe to let go (%s): remove the finalizer", engine.HeldFinalizer, d.Reason)
	case engine.ActionRearm:
		return "disarmed after a failed bootstrap, but its holder got its init data since: give it back to the holder"
	case engine.ActionDisarm:
		return "being deleted by its provider after its holder's bootstrap failed: disarm it until the settle time"
	case engine.ActionProtect:
		return fmt.Sprintf("held by an existing machine: protect it with finalizer %s", engine.HeldFinalizer)
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
		return fmt.Sprintf("Cluster missing since %s, but holder machine %q exists (a restore may still be bringing the Cluster back): looked at again by later repairs; 'kubectl initlock release' removes it", since, d.Holder)
	case engine.WaitGrace:
		return fmt.Sprintf("Cluster missing since %s: a repair from %s on collects it", since, d.WaitUntil.UTC().Format(time.RFC3339))
	case engine.WaitLockRecreated:
		return fmt.Sprintf("lock deleted while machine %q holds the grant: the bootstrap provider recreates it for that machine at its next lock attempt", d.Holder)
	case engine.WaitTakeOver:
		return fmt.Sprintf("holder machine %q does not exist: the next machine of the cluster to ask for the lock takes it over", d.Holder)
	case engine.WaitHeld:
		return fmt.Sprintf("being deleted, but holder machine %q exists and the control plane is not initialised: finalizer %s keeps it until the holder is done; 'kubectl initlock release --force' lets it go", d.Holder, engine.HeldFinalizer)
	case engine.WaitDisarmed:
		return fmt.Sprintf("disarmed after its holder's bootstrap failed: initlock-manager lets it go from %s unless the holder gets its init data", d.WaitUntil.UTC().Format(time.RFC3339))
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
	case engine.ActionUnprotect:
		return "let go"
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

// confirm asks a yes/no question on the error stream, so that it is seen
// when the output is piped, and reads the answer from the input stream,
// terminal or not; only "y" or "yes" is yes, and no answer is no.
func (a *app) confirm(question string) (bool, error) {
	if _, err := fmt.Fprint(a.opts.IOStreams.ErrOut, question); err != nil {
		return false, err
	}
	line, err := bufio.NewReader(a.opts.IOStreams.In).ReadString('\n')
	if errors.Is(err, io.EOF) && strings.TrimSpace(line) == "" {
		_, _ = fmt.Fprintln(a.opts.IOStreams.ErrOut, "(no answer)")
		return false, nil
	}
	if err != nil && !errors.Is(err, io.EOF) {
		return false, fmt.Errorf("reading the answer: %w", err)
	}
	switch strings.ToLower(strings.TrimSpace(line)) {
	case "y", "yes":
		return true, nil
	}
	return false, nil
}
