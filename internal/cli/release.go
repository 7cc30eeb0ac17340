package cli

import (
	"context"
	"errors"
	"fmt"

	"github.com/spf13/cobra"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"

	"github.com/initlock/initlock/internal/cli/inventory"
	"github.com/initlock/initlock/pkg/initlock"
	"github.com/initlock/initlock/pkg/initlock/capi"
	"github.com/initlock/initlock/pkg/initlock/engine"
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

// clusterIdentity is the Cluster Unlock is given: its version, namespace,
// name and, when it exists, UID.
func clusterIdentity(conn *connection, ns, cluster string, observed *engine.Cluster) *unstructured.Unstructured {
	cl := &unstructured.Unstructured{}
	cl.SetGroupVersionKind(capi.ClusterGVK(conn.capiVersion))
	cl.SetNamespace(ns)
	cl.SetName(cluster)
	if observed != nil {
		cl.SetUID(observed.UID)
	}
	return cl
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
	e, err := inventory.Observe(ctx, conn.client, conn.capiVersion, ns, cluster)
	if err != nil {
		return err
	}
	obs := e.Observation
	if obs.Lock == nil && obs.Cluster == nil {
		return clusterNotFound(cluster)
	}
	obs.Intent, obs.Force = engine.IntentRelease, o.force
	d := engine.Decide(obs, engine.Policy{}, a.clock.Now())
	if err := releaseRefusal(d, obs, e, ns, cluster, o.force); err != nil {
		return err
	}
	out := cmd.OutOrStdout()
	if !d.Writes() {
		_, err := fmt.Fprintf(out, "namespace %q: cluster %q has no init lock (no configmap %q); nothing to release.\n", ns, cluster, e.LockName)
		return err
	}
	what := releasedWhat(obs, e)
	switch {
	case obs.Lock == nil:
		what += fmt.Sprintf(", which names %s", grantName(obs))
	case obs.Lock.Problem == nil:
		what += fmt.Sprintf(" of cluster %q (holder %q)", cluster, obs.Lock.Record.MachineName)
	default:
		what += fmt.Sprintf(" of cluster %q", cluster)
	}
	if o.dryRun == dryRunClient {
		_, err := fmt.Fprintf(out, "namespace %q: would release %s%s.\nDry run: nothing was changed.\n", ns, what, forced(d, obs, cluster))
		return err
	}
	question := fmt.Sprintf("Release %s in namespace %q? [y/N]: ", what, ns)
	if d.NeedsForce {
		_, _ = fmt.Fprintf(cmd.ErrOrStderr(), "warning: releasing %s although %s (--force): if kubeadm init is running there, a second machine may run it too\n", what, heldBecause(d, obs, cluster))
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
		if obs, err = a.releaseAgain(ctx, conn, ns, cluster, obs, o.force); err != nil {
			return err
		}
	}
	// Release exactly what was decided on above.
	raw := grantRaw(obs)
	p := engine.UnlockParams{Operator: true, Force: o.force, Register: &raw}
	if obs.Lock != nil {
		p.UID, p.ResourceVersion = obs.Lock.UID, obs.Lock.ResourceVersion
	} else {
		p.NoLock = true
	}
	cl := clusterIdentity(conn, ns, cluster, obs.Cluster)
	env := engine.NewEnv(conn.client)
	env.Clock = a.clock
	if err := env.Unlock(ctx, cl, nil, p); err != nil {
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
	if obs.Lock == nil {
		_, err = fmt.Fprintf(out, "namespace %q: cluster %q has no init lock; emptied its grant register, which named %s.\n", ns, cluster, grantName(obs))
		return err
	}
	holder := "unknown holder"
	if obs.Lock.Problem == nil {
		holder = fmt.Sprintf("holder %q", obs.Lock.Record.MachineName)
	}
	if now := lockNow(ctx, conn, ns, e.LockName, cluster); now != "" {
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
func lockNow(ctx context.Context, conn *connection, ns, lockName, cluster string) string {
	cm := &corev1.ConfigMap{}
	if err := conn.client.Get(ctx, types.NamespacedName{Namespace: ns, Name: lockName}, cm); err != nil {
		return ""
	}
	if lk := engine.ObserveLock(cm, cluster); lk.Problem == nil {
		return fmt.Sprintf("%q", lk.Record.MachineName)
	}
	return "an unknown machine"
}

// releaseAgain reads and decides again, after the operator's answer, the
// release decided on asked: an error when Decide now refuses it, or needs
// --force where it did not, or when the lock or the grant register is no
// longer what was asked about; otherwise the new observation.
func (a *app) releaseAgain(ctx context.Context, conn *connection, ns, cluster string, asked engine.Observation, force bool) (engine.Observation, error) {
	e, err := inventory.Observe(ctx, conn.client, conn.capiVersion, ns, cluster)
	if err != nil {
		return asked, err
	}
	obs := e.Observation
	obs.Intent, obs.Force = engine.IntentRelease, force
	d := engine.Decide(obs, engine.Policy{}, a.clock.Now())
	if err := releaseRefusal(d, obs, e, ns, cluster, force); err != nil {
		return asked, fmt.Errorf("nothing was released: the lock changed while you were asked: %w", err)
	}
	if lockVersion(obs) != lockVersion(asked) || grantRaw(obs) != grantRaw(asked) {
		return asked, fmt.Errorf("namespace %q: cluster %q: its init lock or grant register changed while you were asked; nothing was released; run 'kubectl initlock list -n %s' and try again", ns, cluster, ns)
	}
	return obs, nil
}

// lockVersion names the version of the lock an observation holds: its UID
// and resourceVersion, "" when there is none.
func lockVersion(o engine.Observation) string {
	if o.Lock == nil {
		return ""
	}
	return string(o.Lock.UID) + "/" + o.Lock.ResourceVersion
}

// releaseRefusal renders a release that Decide refuses, or that needs
// --force and was not given it; nil when the release goes ahead.
func releaseRefusal(d engine.Decision, obs engine.Observation, e inventory.Entry, ns, cluster string, force bool) error {
	switch {
	case errors.Is(d.Err, initlock.ErrNotALock):
		return fmt.Errorf("namespace %q: configmap %q is %w; refusing to touch it (with or without --force). Rename or delete it yourself if nothing uses it, or rename the cluster",
			ns, e.LockName, d.Err)
	case errors.Is(d.Err, initlock.ErrClusterPaused):
		return fmt.Errorf("namespace %q: cluster %q: %w: %w; nothing is released while a move or restore may be in progress: unpause it and try again", ns, cluster, errRefused, d.Err)
	case d.Err != nil && !d.NeedsForce:
		return fmt.Errorf("namespace %q: cluster %q: %w", ns, cluster, d.Err)
	case !d.NeedsForce || force:
		return nil
	}
	// Decide refuses the release without --force (d.Err), or it writes
	// nothing: say why it needs --force.
	if obs.Lock == nil && d.ForceReason == "" {
		return fmt.Errorf("namespace %q: cluster %q: %w: its init lock is missing and its grant register (annotation %s) is damaged, so the machine it granted is unknown, and the control plane is not initialised: kubeadm init may be running. Pass --force once you are sure no machine of the cluster is running kubeadm init",
			ns, cluster, errRefused, engine.GrantAnnotation)
	}
	if obs.Lock == nil {
		return fmt.Errorf("namespace %q: cluster %q: %w: its init lock is missing, but its grant register (annotation %s) names %s and the control plane is not initialised, so kubeadm init may be running there and the lock is recreated for it. Wait for the control plane to initialise, delete that machine if its init failed, or pass --force if you are sure no init is running",
			ns, cluster, errRefused, engine.GrantAnnotation, grantName(obs))
	}
	if obs.Lock.Problem != nil {
		return fmt.Errorf("namespace %q: configmap %q: %w: it is a %w, so its holder is unknown, and %s; kubeadm init may be running. Pass --force once you are sure no machine of the cluster is running kubeadm init",
			ns, e.LockName, errRefused, obs.Lock.Problem, clusterState(obs, cluster))
	}
	return fmt.Errorf("namespace %q: configmap %q: %w: %s, so kubeadm init may be running on it and releasing would let a second machine run it. Wait for the control plane to initialise, delete machine %q if its init failed, or pass --force if you are sure no init is running",
		ns, e.LockName, errRefused, heldBecause(d, obs, cluster), d.ForceReason)
}

// forced says, for a release that needs --force, why.
func forced(d engine.Decision, obs engine.Observation, cluster string) string {
	if !d.NeedsForce {
		return ""
	}
	return fmt.Sprintf(", although %s (--force)", heldBecause(d, obs, cluster))
}

// heldBecause says why a release needs --force.
func heldBecause(d engine.Decision, obs engine.Observation, cluster string) string {
	switch {
	case d.ForceReason == "":
		return clusterState(obs, cluster)
	case obs.Lock == nil:
		return fmt.Sprintf("machine %q, which its grant register names, exists and %s", d.ForceReason, clusterState(obs, cluster))
	}
	return fmt.Sprintf("machine %q holds it and %s", d.ForceReason, clusterState(obs, cluster))
}

func clusterState(obs engine.Observation, cluster string) string {
	if obs.Cluster == nil {
		return fmt.Sprintf("cluster %q does not exist (a restore may still be bringing it back)", cluster)
	}
	return fmt.Sprintf("the control plane of cluster %q is not initialised", cluster)
}

func releasedWhat(obs engine.Observation, e inventory.Entry) string {
	switch {
	case obs.Lock == nil:
		return fmt.Sprintf("the grant register of cluster %q", e.ClusterName)
	case obs.Lock.Problem != nil:
		return fmt.Sprintf("corrupt lock %q", e.LockName)
	}
	return fmt.Sprintf("lock %q", e.LockName)
}

func grantRaw(obs engine.Observation) string {
	if obs.Cluster == nil {
		return ""
	}
	return obs.Cluster.Grant.Raw()
}

func grantName(obs engine.Observation) string {
	if obs.Cluster == nil || !obs.Cluster.Grant.Held() {
		return "an unknown machine (the register is damaged)"
	}
	return obs.Cluster.Grant.MachineName
}
