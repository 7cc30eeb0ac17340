package cli

import (
	"context"
	"errors"
	"fmt"

	"github.com/spf13/cobra"
	apierrors "k8s.io/apimachinery/pkg/api/errors"

	"github.com/initlock/initlock/internal/cli/inventory"
	"github.com/initlock/initlock/pkg/initlock"
	"github.com/initlock/initlock/pkg/initlock/keeper"
)

type releaseOptions struct {
	force  bool
	dryRun string
	yes    bool
}

func (a *app) newReleaseCommand() *cobra.Command {
	o := &releaseOptions{}
	cmd := &cobra.Command{
		Use:   "release CLUSTER [-n NAMESPACE] [--force] [--dry-run=client|none] [--yes]",
		Short: "Release one cluster's init lock",
		Long: `Release deletes the init lock of one cluster, with its UID and resourceVersion as
preconditions, after emptying the Cluster's grant register of the holder's
grant, so that the lock is not recreated for it.

It refuses while the holder Machine exists and the Cluster's control plane is
not initialised (or the Cluster does not exist), because kubeadm init may be
running on that Machine: releasing then lets a second Machine run kubeadm init.
--force releases anyway; use it only when you know no init is running (the
holder's init failed, or its infrastructure is gone). A corrupt lock names no
holder, so it is released without --force only once the control plane is
initialised. When the lock is missing but the grant register still names a
machine (the next Lock would recreate the lock for it), release empties the
register, under the same rule. A ConfigMap that takes the lock's name without
being a lock is never touched.

Try 'kubectl initlock repair CLUSTER' first: it lets go only what is safe.
Release says what it is about to release and asks before it does, whether its
output is a terminal or not, unless --yes is given; with no answer (standard
input closed) it changes nothing. --dry-run=client says what it would release
and changes nothing.`,
		Example: `  kubectl initlock release my-cluster -n capi-clusters --dry-run=client
  kubectl initlock release my-cluster -n capi-clusters
  kubectl initlock release my-cluster -n capi-clusters --force`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return a.runRelease(cmd, o, args[0])
		},
	}
	fs := cmd.Flags()
	fs.BoolVar(&o.force, "force", false, "Release even though the holder Machine exists and the control plane is not initialised (asks first, unless --yes).")
	fs.StringVar(&o.dryRun, "dry-run", dryRunNone, `"client" says what would be released and changes nothing; "none" releases.`)
	fs.Lookup("dry-run").NoOptDefVal = dryRunClient
	fs.BoolVarP(&o.yes, "yes", "y", false, "Release without asking for confirmation.")
	return cmd
}

// errRefused marks a release refused for safety.
var errRefused = errors.New("refusing to release")

func (a *app) runRelease(cmd *cobra.Command, o *releaseOptions, cluster string) error {
	if err := validDryRun(o.dryRun); err != nil {
		return err
	}
	if _, err := initlock.LockName(cluster); err != nil {
		return fmt.Errorf("cluster %q: %w", cluster, err)
	}
	ns, err := a.namespace(false)
	if err != nil {
		return err
	}
	conn, err := a.connect()
	if err != nil {
		return err
	}
	ctx := cmd.Context()
	q := keeper.Query{Namespace: ns, Cluster: cluster, CAPIVersion: conn.capiVersion, Release: true, Force: o.force, Now: a.clock.Now()}
	e, err := inventory.Observe(ctx, conn.client, q)
	if err != nil {
		return err
	}
	s := e.Status
	if !s.LockExists && !s.ClusterExists {
		return clusterNotFound(cluster)
	}
	if err := releaseRefusal(s, e.LockName); err != nil {
		return err
	}
	out := cmd.OutOrStdout()
	if !s.Writes {
		_, err := fmt.Fprintf(out, "namespace %q: cluster %q has no init lock (no configmap %q); nothing to release.\n", ns, cluster, e.LockName)
		return err
	}
	what := releasedWhat(s)
	switch {
	case !s.LockExists:
		what += fmt.Sprintf(", which names %s", grantName(s))
	case s.LockProblem == nil:
		what += fmt.Sprintf(" of cluster %q (holder %q)", cluster, s.RecordHolder)
	default:
		what += fmt.Sprintf(" of cluster %q", cluster)
	}
	if o.dryRun == dryRunClient {
		_, err := fmt.Fprintf(out, "namespace %q: would release %s%s.\nDry run: nothing was changed.\n", ns, what, forced(s))
		return err
	}
	question := fmt.Sprintf("Release %s in namespace %q? [y/N]: ", what, ns)
	if s.NeedsForce {
		_, _ = fmt.Fprintf(cmd.ErrOrStderr(), "warning: releasing %s although %s (--force): if kubeadm init is running there, a second machine may run it too\n", what, heldBecause(s))
		question = "Release it anyway? [y/N]: "
	}
	if !o.yes {
		ok, err := a.confirm(question)
		if err != nil {
			return err
		}
		if !ok {
			return &ExitCodeError{Code: ExitError, Err: errors.New("release aborted; nothing was changed (--yes releases without asking)")}
		}
		// The answer may come long after the reading: a Machine restored or
		// created again meanwhile changes the decision. Read and decide
		// again; release only what was asked about, if it still may be.
		if s, err = a.releaseAgain(ctx, conn, s); err != nil {
			return err
		}
	}
	// Release exactly what was decided on above.
	if err := keeper.Release(ctx, conn.client, s, initlock.WithClock(a.clock)); err != nil {
		switch {
		case apierrors.IsForbidden(err):
			return fmt.Errorf("%w; kubectl-initlock needs \"get\" and \"patch\" on \"clusters.cluster.x-k8s.io\" (to empty the grant register) and \"delete\" on \"configmaps\" in namespace %q: ask an administrator to grant them", err, ns)
		case apierrors.IsConflict(err):
			return fmt.Errorf("namespace %q: cluster %q: its init lock changed while releasing it: %w; run 'kubectl initlock list -n %s' and try again", ns, cluster, err, ns)
		case errors.Is(err, initlock.ErrNotHolder):
			return fmt.Errorf("namespace %q: cluster %q: %w: a Machine it names came back while releasing it: %w", ns, cluster, errRefused, err)
		}
		return err
	}
	if !s.LockExists {
		_, err = fmt.Fprintf(out, "namespace %q: cluster %q has no init lock; emptied its grant register, which named %s.\n", ns, cluster, grantName(s))
		return err
	}
	holder := "unknown holder"
	if s.LockProblem == nil {
		holder = fmt.Sprintf("holder %q", s.RecordHolder)
	}
	if now := a.lockNow(ctx, conn, q); now != "" {
		// Unlock ends as done when what it set out to release is gone: a
		// lock of another Machine's stands in its place.
		_, err = fmt.Fprintf(out, "namespace %q: the init lock %q of cluster %q (%s) was replaced while releasing it; the lock that stands now names %s and was left alone.\n", ns, e.LockName, cluster, holder, now)
		return err
	}
	_, err = fmt.Fprintf(out, "namespace %q: released init lock %q of cluster %q (%s).\n", ns, e.LockName, cluster, holder)
	return err
}

// lockNow reads the lock again once a release has ended: the machine the
// lock that stands names, quoted ("an unknown machine" for a lock that is
// not one), or "" when there is none or it cannot be read.
func (a *app) lockNow(ctx context.Context, conn *connection, q keeper.Query) string {
	q.Now = a.clock.Now()
	s, err := keeper.Inspect(ctx, conn.client, q)
	switch {
	case err != nil || !s.LockExists:
		return ""
	case s.LockProblem == nil:
		return fmt.Sprintf("%q", s.RecordHolder)
	}
	return "an unknown machine"
}

// releaseAgain reads and decides again, after the operator's answer, the
// release decided on asked: an error when Decide now refuses it, or needs
// --force where it did not, or when the lock or the grant register is no
// longer what was asked about; otherwise the new Status.
func (a *app) releaseAgain(ctx context.Context, conn *connection, asked keeper.Status) (keeper.Status, error) {
	q := asked.Query
	q.Now = a.clock.Now()
	e, err := inventory.Observe(ctx, conn.client, q)
	if err != nil {
		return asked, err
	}
	s := e.Status
	if err := releaseRefusal(s, e.LockName); err != nil {
		return asked, fmt.Errorf("nothing was released: the lock changed while you were asked: %w", err)
	}
	if lockVersion(s) != lockVersion(asked) || s.Grant != asked.Grant {
		return asked, fmt.Errorf("namespace %q: cluster %q: its init lock or grant register changed while you were asked; nothing was released; run 'kubectl initlock list -n %s' and try again", q.Namespace, q.Cluster, q.Namespace)
	}
	return s, nil
}

// lockVersion names the version of the lock a Status read: its UID and
// resourceVersion, "" when there is none.
func lockVersion(s keeper.Status) string {
	if !s.LockExists {
		return ""
	}
	return string(s.LockUID) + "/" + s.LockResourceVersion
}

// releaseRefusal renders a release that Decide refuses, or that needs
// --force and was not given it; nil when the release goes ahead.
func releaseRefusal(s keeper.Status, lockName string) error {
	ns, cluster := s.Query.Namespace, s.Query.Cluster
	switch {
	case errors.Is(s.Err, initlock.ErrNotALock):
		return fmt.Errorf("namespace %q: configmap %q is %w; refusing to touch it (with or without --force). Rename or delete it yourself if nothing uses it, or rename the cluster",
			ns, lockName, s.Err)
	case errors.Is(s.Err, initlock.ErrClusterPaused):
		return fmt.Errorf("namespace %q: cluster %q: %w: %w; nothing is released while a move or restore may be in progress: unpause it and try again", ns, cluster, errRefused, s.Err)
	case s.Err != nil && !s.NeedsForce:
		return fmt.Errorf("namespace %q: cluster %q: %w", ns, cluster, s.Err)
	case !s.NeedsForce || s.Query.Force:
		return nil
	}
	// Decide refuses the release without --force (s.Err), or it writes
	// nothing: say why it needs --force.
	if !s.LockExists && s.ForceReason == "" {
		return fmt.Errorf("namespace %q: cluster %q: %w: its init lock is missing and its grant register (annotation initlock.dev/init-lock-grant) is damaged, so the machine it granted is unknown, and the control plane is not initialised: kubeadm init may be running. Pass --force once you are sure no machine of the cluster is running kubeadm init",
			ns, cluster, errRefused)
	}
	if !s.LockExists {
		return fmt.Errorf("namespace %q: cluster %q: %w: its init lock is missing, but its grant register (annotation initlock.dev/init-lock-grant) names %s and the control plane is not initialised, so kubeadm init may be running there and the lock is recreated for it. Wait for the control plane to initialise, delete that machine if its init failed, or pass --force if you are sure no init is running",
			ns, cluster, errRefused, grantName(s))
	}
	if s.LockProblem != nil {
		return fmt.Errorf("namespace %q: configmap %q: %w: it is a %w, so its holder is unknown, and %s; kubeadm init may be running. Pass --force once you are sure no machine of the cluster is running kubeadm init",
			ns, lockName, errRefused, s.LockProblem, clusterState(s))
	}
	return fmt.Errorf("namespace %q: configmap %q: %w: %s, so kubeadm init may be running on it and releasing would let a second machine run it. Wait for the control plane to initialise, delete machine %q if its init failed, or pass --force if you are sure no init is running",
		ns, lockName, errRefused, heldBecause(s), s.ForceReason)
}

// forced says, for a release that needs --force, why.
func forced(s keeper.Status) string {
	if !s.NeedsForce {
		return ""
	}
	return fmt.Sprintf(", although %s (--force)", heldBecause(s))
}

// heldBecause says why a release needs --force.
func heldBecause(s keeper.Status) string {
	switch {
	case s.ForceReason == "":
		return clusterState(s)
	case !s.LockExists:
		return fmt.Sprintf("machine %q, which its grant register names, exists and %s", s.ForceReason, clusterState(s))
	}
	return fmt.Sprintf("machine %q holds it and %s", s.ForceReason, clusterState(s))
}

func clusterState(s keeper.Status) string {
	if !s.ClusterExists {
		return fmt.Sprintf("cluster %q does not exist (a restore may still be bringing it back)", s.Query.Cluster)
	}
	return fmt.Sprintf("the control plane of cluster %q is not initialised", s.Query.Cluster)
}

func releasedWhat(s keeper.Status) string {
	switch {
	case !s.LockExists:
		return fmt.Sprintf("the grant register of cluster %q", s.Query.Cluster)
	case s.LockProblem != nil:
		return fmt.Sprintf("corrupt lock %q", s.LockName)
	}
	return fmt.Sprintf("lock %q", s.LockName)
}

func grantName(s keeper.Status) string {
	if s.GrantHolder == "" {
		return "an unknown machine (the register is damaged)"
	}
	return s.GrantHolder
}
