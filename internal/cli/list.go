package cli

import (
	"errors"
	"fmt"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
	"k8s.io/apimachinery/pkg/labels"

	"github.com/initlock/initlock/internal/cli/inventory"
	"github.com/initlock/initlock/pkg/initlock/keeper"
)

// policyFlags are the repair policy, shared by list (for its action
// column) and repair.
type policyFlags struct {
	releaseAfterInit bool
	orphanGrace      time.Duration
}

func (p *policyFlags) add(fs *pflag.FlagSet) {
	fs.BoolVar(&p.releaseAfterInit, "release-after-init", keeper.DefaultPolicy().ReleaseAfterInit,
		"Release a lock once its cluster's control plane is initialised. By default, the installed initlock-manager's setting.")
	fs.DurationVar(&p.orphanGrace, "orphan-grace", keeper.DefaultPolicy().OrphanGrace,
		"How long a lock's Cluster must have been missing before the lock is collected; the time counts from the cluster-absent mark that a first repair writes on the lock. By default, the installed initlock-manager's setting.")
}

func (p *policyFlags) policy() (keeper.Policy, error) {
	if p.orphanGrace < 0 {
		return keeper.Policy{}, fmt.Errorf("--orphan-grace must not be negative (got %s)", p.orphanGrace)
	}
	return keeper.Policy{ReleaseAfterInit: p.releaseAfterInit, OrphanGrace: p.orphanGrace}, nil
}

func policyStatus(p keeper.Policy) PolicyStatus {
	return PolicyStatus{ReleaseAfterInit: p.ReleaseAfterInit, OrphanGrace: p.OrphanGrace.String()}
}

// scopeFlags say which locks a command looks at: -A, -l and an optional
// CLUSTER argument (the namespace comes from -n or the kubeconfig).
type scopeFlags struct {
	allNamespaces bool
	selector      string
	// cluster, when set, is the only cluster looked at.
	cluster string
}

func (s *scopeFlags) add(fs *pflag.FlagSet, verb string) {
	fs.BoolVarP(&s.allNamespaces, "all-namespaces", "A", false, verb+" the locks in all namespaces.")
	fs.StringVarP(&s.selector, "selector", "l", "", verb+" only the locks of the Clusters this label selector selects (e.g. -l env=prod,tier!=dev); a lock whose Cluster does not exist (an orphan) is then left out.")
}

// parse takes the CLUSTER argument, if any, and checks the flags go
// together.
func (s *scopeFlags) parse(args []string) error {
	if len(args) == 0 {
		return nil
	}
	switch {
	case s.allNamespaces:
		return errors.New("a CLUSTER names a cluster of one namespace: drop -A or the cluster name")
	case s.selector != "":
		return errors.New("a CLUSTER cannot be given with a selector (-l): drop one of them")
	}
	s.cluster = args[0]
	return nil
}

// gather reads the inventory of the scope: the namespace it is in ("" for
// all) and the entries.
func (a *app) gather(cmd *cobra.Command, conn *connection, s *scopeFlags, p keeper.Policy, now time.Time) (string, *inventory.Inventory, error) {
	ns, err := a.namespace(s.allNamespaces)
	if err != nil {
		return "", nil, err
	}
	opts := inventory.Options{Namespace: ns, CAPIVersion: conn.capiVersion, Policy: p, Now: now}
	if s.selector != "" {
		if opts.ClusterSelector, err = labels.Parse(s.selector); err != nil {
			return "", nil, fmt.Errorf("invalid selector %q: %w", s.selector, err)
		}
	}
	inv, err := inventory.Gather(cmd.Context(), conn.client, opts)
	return ns, inv, err
}

type listOptions struct {
	scope     scopeFlags
	output    string
	noHeaders bool
	showFree  bool
	policy    policyFlags
	guard     guardFlag
}

func (a *app) newListCommand() *cobra.Command {
	o := &listOptions{}
	cmd := &cobra.Command{
		Use:   "list [CLUSTER] [-n NAMESPACE | -A] [-l SELECTOR] [-o table|wide|name|json|yaml]",
		Short: "List the init locks with a verdict for each",
		Long: `List prints one row per init lock: its namespace, cluster and holder machine,
whether the holder exists, the state of its Cluster ownerReference (ok, missing,
stale-uid, wrong-cluster), how it stands against a delete (PROTECTION: guarded,
the lock guard initlock-lock-guard is in force and refuses every delete but a
release's; unguarded, no mark lets it go but the lock guard is not in force, so
anyone may delete it; unknown, whether the lock guard is in force cannot be
read; releasable, a release marked it and its delete is under way or was cut
off; moving, clusterctl move marked it; deleting, held back by another
controller's finalizer), whether the control plane is initialised, its age and a
verdict: healthy, unowned, held-after-init, conflict, stale-holder, orphan,
corrupt or foreign. It also lists Clusters whose lock name is taken by a
ConfigMap that is not a lock (foreign), and Clusters whose lock was deleted
while a Machine holds its grant (lost). Clusters without a lock (free) are shown
with --show-free. Given a CLUSTER, it lists that cluster's lock only, even when
free, and fails with NotFound when there is neither such a Cluster nor a lock of
it.

-o wide adds the lock's name, whether the Cluster is paused, the action the
installed initlock-manager takes (the one repair would take) and the problem.
The action is judged with the manager's settings, read from the arguments of
its Deployment (label app.kubernetes.io/name=initlock-manager):
--release-after-init, --orphan-grace, and --namespace and --watch-filter, so
that a lock the manager does not handle shows the action none. Without such a
Deployment, the defaults are used, and a line on stderr says so.

The lock guard is checked once (its ValidatingAdmissionPolicy and binding, as
initlock-manager checks them): when it is not in force, or cannot be read, a
line on stderr says why, and -o json and yaml say it in lockGuard.

-o name prints TYPE/NAME of each row: configmap/<cluster>-lock, or
cluster.cluster.x-k8s.io/<cluster> for a row without a lock (free, lost).
-o json and -o yaml print a LockList (apiVersion initlock.dev/v1alpha1).`,
		Example: `  kubectl initlock list -A
  kubectl initlock list -n capi-clusters -o wide
  kubectl initlock list my-cluster -n capi-clusters
  kubectl initlock list -A -l env=prod --no-headers
  kubectl initlock list -A -o json | jq '.items[] | select(.verdict != "healthy")'`,
		Args: cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := o.scope.parse(args); err != nil {
				return err
			}
			return a.runList(cmd, o)
		},
	}
	fs := cmd.Flags()
	o.scope.add(fs, "List")
	fs.StringVarP(&o.output, "output", "o", "", "Output format: table (default), wide, name, json or yaml.")
	fs.BoolVar(&o.noHeaders, "no-headers", false, "Do not print the header of the table (-o table and -o wide).")
	fs.BoolVar(&o.showFree, "show-free", false, "Also list Clusters that have no lock (verdict free).")
	o.policy.add(fs)
	o.guard.add(fs)
	return cmd
}

func (a *app) runList(cmd *cobra.Command, o *listOptions) error {
	if err := validOutput(o.output, listOutputs); err != nil {
		return err
	}
	if _, err := o.policy.policy(); err != nil {
		return err
	}
	conn, err := a.connect()
	if err != nil {
		return err
	}
	ctx := cmd.Context()
	// Actions are shown by -o wide, json and yaml only: the other formats
	// do not need the manager's settings, nor the request that reads them.
	var used usedPolicy
	if o.output == outputWide || o.output == outputJSON || o.output == outputYAML {
		if used, err = a.managerPolicy(ctx, cmd, conn, &o.policy); err != nil {
			return err
		}
		if o.output == outputWide {
			used.report(a)
		}
	} else {
		used.Policy, _ = o.policy.policy()
	}
	// -o name shows no protection: it does not need the lock guard.
	var guard LockGuardStatus
	if o.output != outputName {
		guard = a.lockGuard(ctx, conn, o.guard.name)
	}
	now := a.clock.Now()
	ns, inv, err := a.gather(cmd, conn, &o.scope, used.Policy, now)
	if err != nil {
		return err
	}
	list := LockList{APIVersion: ListAPIVersion, Kind: ListKind, Policy: policyStatus(used.Policy), PolicySource: used.source,
		LockGuard: guard, Items: []LockStatus{}}
	rows := decideAll(inv, used)
	if o.scope.cluster != "" {
		if rows, err = onlyCluster(rows, o.scope.cluster); err != nil {
			return err
		}
	}
	for _, r := range rows {
		if r.status().Verdict == "free" && !o.showFree && o.scope.cluster == "" {
			continue
		}
		list.Items = append(list.Items, r.lockStatus(guard))
	}
	out := cmd.OutOrStdout()
	switch o.output {
	case outputJSON:
		return printJSON(out, list)
	case outputYAML:
		return printYAML(out, list)
	}
	if len(list.Items) == 0 {
		where := fmt.Sprintf("in namespace %q", ns)
		if ns == "" {
			where = "in any namespace"
		}
		_, err := fmt.Fprintf(cmd.ErrOrStderr(), "No init locks found %s.\n", where)
		return err
	}
	if o.output == outputName {
		return printNames(out, lockNames(list.Items))
	}
	guard.report(cmd.ErrOrStderr())
	return printTable(out, list.Items, tableOptions{wide: o.output == outputWide, noHeaders: o.noHeaders, colour: a.useColour(out)}, now)
}
