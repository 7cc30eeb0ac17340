package cli

import (
	"errors"
	"fmt"

	"github.com/spf13/cobra"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/initlock/initlock/internal/capi"
	"github.com/initlock/initlock/internal/cli/inventory"
	"github.com/initlock/initlock/pkg/initlock"
)

type releaseOptions struct {
	force bool
}

func (a *app) newReleaseCommand() *cobra.Command {
	o := &releaseOptions{}
	cmd := &cobra.Command{
		Use:   "release CLUSTER [-n NAMESPACE] [--force]",
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
being a lock is never touched.`,
		Example: `  kubectl initlock release my-cluster -n capi-clusters
  kubectl initlock release my-cluster -n capi-clusters --force`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return a.runRelease(cmd, o, args[0])
		},
	}
	cmd.Flags().BoolVar(&o.force, "force", false, "Release even though the holder Machine exists and the control plane is not initialised.")
	return cmd
}

// releaseGrant handles a cluster whose lock is missing while its grant
// register is not empty: Lock would recreate the lock for the Machine the
// register names. It empties the register, refusing while that Machine
// exists and the control plane is not initialised unless --force.
func (a *app) releaseGrant(cmd *cobra.Command, o *releaseOptions, conn *connection, ns, cluster string, obs initlock.Observation) error {
	g := obs.Cluster.Grant
	name := g.MachineName
	if g.Damaged() {
		name = "an unknown machine (the register is damaged)"
	}
	if d := initlock.Decide(obs, initlock.Policy{}, a.clock.Now()); d.Verdict == initlock.VerdictLost && !o.force {
		return fmt.Errorf("namespace %q: cluster %q: %w: its init lock is missing, but its grant register (annotation %s) names %s and the control plane is not initialised, so kubeadm init may be running there and the lock is recreated for it. Wait for the control plane to initialise, delete that machine if its init failed, or pass --force if you are sure no init is running",
			ns, cluster, errRefused, initlock.GrantAnnotation, name)
	}
	cl := clusterIdentity(conn, ns, cluster, obs.Cluster)
	if err := initlock.New(conn.client, initlock.WithClock(a.clock)).Unlock(cmd.Context(), cl, nil, initlock.AnyHolder()); err != nil {
		if apierrors.IsForbidden(err) {
			return fmt.Errorf("%w; kubectl-initlock needs \"get\" and \"patch\" on \"clusters.cluster.x-k8s.io\" in namespace %q to empty the grant register: ask an administrator to grant them", err, ns)
		}
		return err
	}
	_, err := fmt.Fprintf(cmd.OutOrStdout(), "namespace %q: cluster %q has no init lock; emptied its grant register, which named %s.\n", ns, cluster, name)
	return err
}

// clusterIdentity is the Cluster Unlock is given: its version, namespace,
// name and, when it exists, UID.
func clusterIdentity(conn *connection, ns, cluster string, observed *initlock.Cluster) *unstructured.Unstructured {
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
	out := cmd.OutOrStdout()
	obs := e.Observation
	if obs.Lock == nil {
		if obs.Cluster == nil {
			return clusterNotFound(cluster)
		}
		if obs.Cluster.Grant != nil {
			return a.releaseGrant(cmd, o, conn, ns, cluster, obs)
		}
		_, err := fmt.Fprintf(out, "namespace %q: cluster %q has no init lock (no configmap %q); nothing to release.\n", ns, cluster, e.LockName)
		return err
	}
	initialised := obs.Cluster != nil && obs.Cluster.Initialized
	clusterState := fmt.Sprintf("the control plane of cluster %q is not initialised", cluster)
	if obs.Cluster == nil {
		clusterState = fmt.Sprintf("cluster %q does not exist (a restore may still be bringing it back)", cluster)
	}

	var machine client.Object
	switch {
	case errors.Is(obs.Lock.Problem, initlock.ErrNotALock):
		return fmt.Errorf("namespace %q: configmap %q is %w; refusing to touch it (with or without --force). Rename or delete it yourself if nothing uses it, or rename the cluster",
			ns, e.LockName, obs.Lock.Problem)
	case obs.Lock.Problem != nil:
		if !initialised && !o.force {
			return fmt.Errorf("namespace %q: configmap %q: %w: it is a %w, so its holder is unknown, and %s; kubeadm init may be running. Pass --force once you are sure no machine of the cluster is running kubeadm init",
				ns, e.LockName, errRefused, obs.Lock.Problem, clusterState)
		}
		if !initialised {
			_, _ = fmt.Fprintf(cmd.ErrOrStderr(), "warning: releasing corrupt lock %q although %s (--force)\n", e.LockName, clusterState)
		}
	default:
		holder := obs.Lock.Record.MachineName
		if obs.Holder != nil && !initialised {
			if !o.force {
				return fmt.Errorf("namespace %q: configmap %q: %w: machine %q holds it and %s, so kubeadm init may be running on it and releasing would let a second machine run it. Wait for the control plane to initialise, delete machine %q if its init failed, or pass --force if you are sure no init is running",
					ns, e.LockName, errRefused, holder, clusterState, holder)
			}
			_, _ = fmt.Fprintf(cmd.ErrOrStderr(), "warning: releasing lock %q although machine %q holds it and %s (--force)\n", e.LockName, holder, clusterState)
		}
		m := &metav1.PartialObjectMetadata{}
		m.SetGroupVersionKind(capi.MachineGVK(conn.capiVersion))
		m.SetNamespace(ns)
		m.SetName(holder)
		if obs.Holder != nil {
			m.SetUID(obs.Holder.UID)
		}
		machine = m
	}

	// The Cluster may be gone (an orphan lock): Unlock only needs its
	// identity.
	cl := clusterIdentity(conn, ns, cluster, obs.Cluster)
	locker := initlock.New(conn.client, initlock.WithClock(a.clock))
	// Release exactly the lock that was checked above.
	opts := []initlock.UnlockOption{initlock.IfUnchanged(obs.Lock.UID, obs.Lock.ResourceVersion)}
	if machine == nil {
		opts = append(opts, initlock.AnyHolder())
	}
	if err := locker.Unlock(ctx, cl, machine, opts...); err != nil {
		if apierrors.IsForbidden(err) {
			return fmt.Errorf("%w; kubectl-initlock needs \"get\" and \"patch\" on \"clusters.cluster.x-k8s.io\" (to empty the grant register) and \"delete\" on \"configmaps\" in namespace %q: ask an administrator to grant them", err, ns)
		}
		if apierrors.IsConflict(err) {
			return fmt.Errorf("namespace %q: configmap %q changed while releasing it: %w; run 'kubectl initlock list -n %s' and try again", ns, e.LockName, err, ns)
		}
		if errors.Is(err, initlock.ErrNotHolder) {
			return fmt.Errorf("%w; the lock changed hands while releasing it: run 'kubectl initlock list -n %s' and try again", err, ns)
		}
		return err
	}
	holder := "unknown holder"
	if obs.Lock.Problem == nil {
		holder = fmt.Sprintf("holder %q", obs.Lock.Record.MachineName)
	}
	_, err = fmt.Fprintf(out, "namespace %q: released init lock %q of cluster %q (%s).\n", ns, e.LockName, cluster, holder)
	return err
}
