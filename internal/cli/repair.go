package cli

import (
	"context"
	"errors"
	"fmt"

	"github.com/spf13/cobra"
	apierrors "k8s.io/apimachinery/pkg/api/errors"

	"github.com/initlock/initlock/internal/cli/inventory"
	"github.com/initlock/initlock/pkg/initlock/keeper"
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
	guard  guardFlag
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
  - unmark: takes off a lock it does not release the marks that let anyone
    delete it (a release mark, clusterctl move's delete-for-move) left by a
    release or a move that stopped half-way;
  - mark-orphan: records on a lock whose Cluster is missing since when
    (annotation initlock.dev/cluster-absent-since).

What it lets go, each a release past the lock guard: it marks the lock
(annotation initlock.dev/releasable, the lock's UID, with a resourceVersion
precondition), then deletes it (UID and resourceVersion preconditions):
  - release: the lock of a Cluster whose control plane is initialised
    (unless --release-after-init=false), of a Cluster being deleted once
    no Machine it names exists (the guard refuses the garbage collector's
    delete), and of an uninitialised Cluster whose holder Machine is gone
    while no grant names another Machine, so that the next Machine may
    take it;
  - collect: a lock whose Cluster has been missing for --orphan-grace since
    a first repair marked it, once its holder Machine is gone too.

What it never lets go: a lock whose holder Machine exists while the control
plane is not initialised (kubeadm init may be running: only 'kubectl
initlock release --force' releases it), a corrupt lock, a ConfigMap that is
not a lock, and anything of a paused Cluster; these are listed with the way
out. A lock that changed since it was read is read and decided again, up to
5 times.

It checks the lock guard once, as list does, and says on stderr when it is not
in force or cannot be read: repair's releases do not need it, but until it is
in force anyone may delete a held lock.

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
	o.guard.add(fs)
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
		s := r.status()
		switch {
		case s.Wait == "person":
			p.human = append(p.human, r)
		case r.unhandled != "" && s.Action != "none":
			p.waiting = append(p.waiting, r)
		case s.Err == nil && s.Action != "none":
			p.changes = append(p.changes, r)
		case s.Wait != "" && (s.Verdict != "healthy" || s.Wait == "deleting"):
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
	a.lockGuard(ctx, conn, o.guard.name).report(cmd.ErrOrStderr())
	policy := used.Policy
	now := a.clock.Now()
	_, inv, err := a.gather(cmd, conn, &o.scope, policy, now)
	if err != nil {
		return err
	}
	rows := decideAll(inv, used)
	if o.scope.cluster != "" {
		if rows, err = onlyCluster(rows, o.scope.cluster); err != nil {
			return err
		}
	}
	p := plan(rows)
	out := cmd.OutOrStdout()
	if err := printPlan(out, p, policy); err != nil {
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
	done := map[string]int{}
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
	action string
	note   string
}

// repairOne applies r's decision with keeper.Apply, which confirms it
// against the Cluster as it is now (the plan may be minutes old). When the
// lock changed since it was observed (a conflict or a missing object), it
// observes that lock again, decides again and applies the new decision, a
// bounded number of times.
func (a *app) repairOne(ctx context.Context, conn *connection, r row, policy keeper.Policy) (repairResult, error) {
	first := r.status().Action
	for attempt := 1; ; attempt++ {
		s := r.status()
		now, err := keeper.Apply(ctx, conn.client, s, a.clock.Now())
		if err == nil && now.Action != s.Action {
			return repairResult{action: "none", note: fmt.Sprintf(" (the Cluster or its Machines had changed; now %s, nothing to do)", now.Verdict)}, nil
		}
		if err == nil {
			res := repairResult{action: s.Action}
			if res.action != first {
				res.note = fmt.Sprintf(" (the lock had changed; %s instead of %s)", res.action, first)
			}
			return res, nil
		}
		if st := (*apierrors.StatusError)(nil); errors.As(err, &st) && apierrors.IsForbidden(err) &&
			st.ErrStatus.Details != nil && st.ErrStatus.Details.Kind == "configmaps" {
			verb := "patch"
			if s.Action == "release" || s.Action == "collect" {
				verb = "delete"
			}
			return repairResult{}, fmt.Errorf("namespace %q: configmap %q: %s: permission denied: kubectl-initlock needs %q on \"configmaps\" in namespace %q; ask an administrator to grant it, or run 'kubectl initlock repair --dry-run=client' to see the plan only: %w",
				r.entry.Namespace, r.entry.LockName, s.Action, verb, r.entry.Namespace, err)
		}
		if !apierrors.IsConflict(err) && !apierrors.IsNotFound(err) {
			return repairResult{}, fmt.Errorf("namespace %q: configmap %q: %s: %w", r.entry.Namespace, r.entry.LockName, s.Action, err)
		}
		if attempt == maxApplyAttempts {
			return repairResult{}, fmt.Errorf("namespace %q: configmap %q: %s: the lock changed %d times in a row while repairing it; run repair again: %w",
				r.entry.Namespace, r.entry.LockName, s.Action, attempt, err)
		}
		e, oerr := inventory.Observe(ctx, conn.client, keeper.Query{Namespace: r.entry.Namespace, Cluster: r.entry.ClusterName,
			CAPIVersion: conn.capiVersion, Policy: policy, Now: a.clock.Now()})
		if oerr != nil {
			return repairResult{}, oerr
		}
		if again := e.Status; again.Err != nil || again.Action == "none" {
			return repairResult{action: "none", note: fmt.Sprintf(" (the lock had changed; now %s, nothing to do)", again.Verdict)}, nil
		}
		r = row{entry: e}
	}
}
