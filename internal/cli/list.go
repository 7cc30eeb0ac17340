package cli

import (
	"errors"
	"fmt"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/initlock/initlock/internal/cli/inventory"
	"github.com/initlock/initlock/pkg/initlock/engine"
)

// policyFlags are the repair policy, shared by list (for its action
// column) and repair.
type policyFlags struct {
	releaseAfterInit bool
	orphanGrace      time.Duration
}

func (p *policyFlags) add(fs *pflag.FlagSet) {
	fs.BoolVar(&p.releaseAfterInit, "release-after-init", engine.DefaultPolicy.ReleaseAfterInit,
		"Release a lock once its cluster's control plane is initialised.")
	fs.DurationVar(&p.orphanGrace, "orphan-grace", engine.DefaultPolicy.OrphanGrace,
		"How long a lock's Cluster must have been missing before the lock is collected. The time counts from the cluster-absent mark that a first repair writes on the lock.")
}

func (p *policyFlags) policy() (engine.Policy, error) {
	if p.orphanGrace < 0 {
		return engine.Policy{}, fmt.Errorf("--orphan-grace must not be negative (got %s)", p.orphanGrace)
	}
	return engine.Policy{ReleaseAfterInit: p.releaseAfterInit, OrphanGrace: p.orphanGrace}, nil
}

func policyStatus(p engine.Policy) PolicyStatus {
	return PolicyStatus{ReleaseAfterInit: p.ReleaseAfterInit, OrphanGrace: p.OrphanGrace.String()}
}

type listOptions struct {
	allNamespaces bool
	output        string
	showFree      bool
	policy        policyFlags
	// cluster, when set, is the only cluster listed.
	cluster string
}

func (a *app) newListCommand() *cobra.Command {
	o := &listOptions{}
	cmd := &cobra.Command{
		Use:   "list [CLUSTER] [-n NAMESPACE | -A] [-o table|wide|json|yaml]",
		Short: "List the init locks with a verdict for each",
		Long: `List prints one row per init lock: its namespace, cluster and holder machine,
whether the holder exists, the state of its Cluster ownerReference (ok, missing,
stale-uid, wrong-cluster), whether the control plane is initialised, its age and
a verdict: healthy, unowned, held-after-init, stale-holder, orphan, corrupt or
foreign. It also lists Clusters whose lock name is taken by a ConfigMap that is
not a lock (foreign), and Clusters whose lock was deleted while a Machine holds
its grant (lost). Clusters without a lock (free) are shown with --show-free.
Given a CLUSTER, it lists that cluster's lock only, even when free, and fails
with NotFound when there is neither such a Cluster nor a lock of it.

-o json and -o yaml print a LockList (apiVersion initlock.dev/v1alpha1).`,
		Example: `  kubectl initlock list -A
  kubectl initlock list -n capi-clusters -o wide
  kubectl initlock list my-cluster -n capi-clusters
  kubectl initlock list -A -o json | jq '.items[] | select(.verdict != "healthy")'`,
		Args: cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if len(args) == 1 {
				if o.allNamespaces {
					return errors.New("a CLUSTER names a cluster of one namespace: drop -A or the cluster name")
				}
				o.cluster = args[0]
			}
			return a.runList(cmd, o)
		},
	}
	fs := cmd.Flags()
	fs.BoolVarP(&o.allNamespaces, "all-namespaces", "A", false, "List the locks in all namespaces.")
	fs.StringVarP(&o.output, "output", "o", "", "Output format: table (default), wide, json or yaml.")
	fs.BoolVar(&o.showFree, "show-free", false, "Also list Clusters that have no lock (verdict free).")
	o.policy.add(fs)
	return cmd
}

func (a *app) runList(cmd *cobra.Command, o *listOptions) error {
	if err := validOutput(o.output); err != nil {
		return err
	}
	policy, err := o.policy.policy()
	if err != nil {
		return err
	}
	ns, err := a.namespace(o.allNamespaces)
	if err != nil {
		return err
	}
	conn, err := a.connect()
	if err != nil {
		return err
	}
	inv, err := inventory.Gather(cmd.Context(), conn.client, inventory.Options{Namespace: ns, CAPIVersion: conn.capiVersion})
	if err != nil {
		return err
	}
	now := a.clock.Now()
	list := LockList{APIVersion: ListAPIVersion, Kind: ListKind, Policy: policyStatus(policy), Items: []LockStatus{}}
	rows := decideAll(inv, policy, now)
	if o.cluster != "" {
		if rows, err = onlyCluster(rows, o.cluster); err != nil {
			return err
		}
	}
	for _, r := range rows {
		if r.decision.Verdict == engine.VerdictFree && !o.showFree && o.cluster == "" {
			continue
		}
		list.Items = append(list.Items, r.status())
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
	return printTable(out, list.Items, o.output == outputWide, a.useColour(out), now)
}
