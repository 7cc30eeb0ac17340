package demo

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/initlock/initlock/internal/kubeenv"
	"github.com/initlock/initlock/internal/kubeenv/stack"
	"github.com/initlock/initlock/internal/kubeenv/wire"
	"github.com/initlock/initlock/internal/relink"
)

// seedUpstream: CAPI core and CABPK create the seed's Cluster, CABPK takes
// the lock; the Cluster is paused and backed up by cluster 1's Velero, and
// restored into cluster 2 by its own Velero with a namespace mapping. The
// lock comes back unowned and outlives its Cluster.
func (d *realDemo) seedUpstream() {
	tl := d.tl
	tl.chapter("Upstream alone", "The seed, with upstream alone",
		"The reporter's process: pause the CAPI objects, back the namespace up, restore it into a new",
		"namespace of a second management cluster, unpause. Nothing of initlock is installed.")
	src, dst := d.source, d.target
	tl.step("CAPI core and CABPK create Cluster seed; CABPK takes the lock for seed-cp-0", func(n note) error {
		if err := src.Client.Create(d.ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: realNamespace}}); err != nil {
			return err
		}
		if err := src.CreateCluster(d.ctx, realNamespace, seedCluster, stack.ClusterOptions{}); err != nil {
			return err
		}
		if err := src.CreateMachine(d.ctx, realNamespace, seedCluster, seedMachine, true); err != nil {
			return err
		}
		cm, err := src.WaitLockHeld(d.ctx, realNamespace, seedCluster, seedMachine)
		if err != nil {
			return err
		}
		n("the infrastructure (LocalCluster, LocalMachine) reports provisioned, as a provider would")
		n("CABPK wrote lock %s", describeLock(cm))
		return nil
	})
	tl.step("Pause the Cluster and back its namespace up with cluster 1's Velero", func(n note) error {
		command(n, "[cluster-1] ", "kubectl", "-n", realNamespace, "patch", "cluster", seedCluster, "--type", "merge", "-p", `{"spec":{"paused":true}}`)
		if err := src.SetPaused(d.ctx, realNamespace, seedCluster, true); err != nil {
			return err
		}
		if err := src.WaitCondition(d.ctx, realNamespace, seedCluster, "Paused"); err != nil {
			return err
		}
		v, err := src.StartVelero(d.ctx, false)
		if err != nil {
			return err
		}
		defer src.StopVelero()
		command(n, "[cluster-1] ", append([]string{"velero"}, stack.BackupArgs(realBackup, realNamespace)...)...)
		if err := v.BackupNamespace(d.ctx, realBackup, realNamespace); err != nil {
			return err
		}
		b, err := v.Backup(d.ctx, realBackup)
		if err != nil {
			return err
		}
		n("backup %s %s: %d items, written to the bucket through the AWS plugin", realBackup, b.Status.Phase, b.Status.Progress.ItemsBackedUp)
		return nil
	})
	var restored time.Time
	tl.step("Restore it into a new namespace of cluster 2, with cluster 2's own Velero", func(n note) error {
		v, err := dst.StartVelero(d.ctx, false)
		if err != nil {
			return err
		}
		defer dst.StopVelero()
		if err := v.WaitBackupSynced(d.ctx, realBackup); err != nil {
			return err
		}
		n("Velero's backup sync reads the bucket when the server starts and then once a minute")
		if err := d.show(n, dst, v, "", "backup", "get", realBackup); err != nil {
			return err
		}
		args := stack.RestoreArgs("seed-upstream", realBackup, "--namespace-mappings", realNamespace+":"+realUpstreamNS)
		command(n, "[cluster-2] ", append([]string{"velero"}, args...)...)
		if err := v.RestoreBackup(d.ctx, "seed-upstream", realBackup, "--namespace-mappings", realNamespace+":"+realUpstreamNS); err != nil {
			return err
		}
		restored = time.Now()
		return nil
	})
	tl.step("Unpause: the lock is unowned, and nothing re-adopts it", func(n note) error {
		command(n, "[cluster-2] ", "kubectl", "-n", realUpstreamNS, "patch", "cluster", seedCluster, "--type", "merge", "-p", `{"spec":{"paused":false}}`)
		if err := dst.SetPaused(d.ctx, realUpstreamNS, seedCluster, false); err != nil {
			return err
		}
		if err := sleep(d.ctx, 3*time.Second); err != nil {
			return err
		}
		cm, err := kubeenv.GetLock(d.ctx, dst.Client, realUpstreamNS, seedCluster)
		if err != nil {
			return err
		}
		if cm == nil {
			return fmt.Errorf("%w: the restored lock is gone", errNotReproduced)
		}
		if len(cm.OwnerReferences) != 0 {
			return fmt.Errorf("%w: the lock is owned again: %v", errNotReproduced, cm.OwnerReferences)
		}
		n("%s after the restore: lock %s", duration(time.Since(restored)), describeLock(cm))
		n("the seed's bug, reproduced with the real Velero and Cluster API")
		return nil
	})
	tl.step("Delete the Cluster: core deletes its Machines, and the lock outlives it", func(n note) error {
		command(n, "[cluster-2] ", "kubectl", "-n", realUpstreamNS, "delete", "cluster", seedCluster)
		if err := dst.DeleteCluster(d.ctx, realUpstreamNS, seedCluster); err != nil {
			return err
		}
		if err := sleep(d.ctx, 3*time.Second); err != nil {
			return err
		}
		left, err := dst.Leftovers(d.ctx, realUpstreamNS)
		if err != nil {
			return err
		}
		if !slices.Contains(left, "ConfigMap/"+seedCluster+wire.LockSuffix) {
			return fmt.Errorf("%w: the lock went with its Cluster (left: %v)", errNotReproduced, left)
		}
		n("left behind 3s after the Cluster was gone: %s", strings.Join(left, ", "))
		return nil
	})
}

// seedInitlock: the same backup restored into cluster 2 once more, with
// initlock-manager running there and initlock's plugin in its Velero.
func (d *realDemo) seedInitlock() {
	tl := d.tl
	tl.chapter("With initlock", "The same restore, with initlock installed in cluster 2",
		"initlock-manager runs as a process with its own kubeconfig and config/rbac's role (plus the",
		"bootstrap and infrastructure kinds for its relinker), with its lock guard (config/protection);",
		"Velero loads initlock's plugin.")
	dst := d.target
	var backed []*unstructured.Unstructured
	tl.step("Start initlock-manager in cluster 2, with its lock guard", func(n note) error {
		var err error
		if backed, err = d.source.Graph(d.ctx, realNamespace); err != nil {
			return err
		}
		if err := dst.GrantProviderKinds(d.ctx); err != nil {
			return err
		}
		if err := dst.GrantRelinkSecrets(d.ctx); err != nil {
			return err
		}
		if _, err := dst.StartManager(d.ctx, stack.ManagerOptions{Args: []string{"--relink-kinds=" + stack.ProviderRelinkKinds, "--relink-secrets"}}); err != nil {
			return err
		}
		n("initlock-manager --relink-kinds=%s --relink-secrets", stack.ProviderRelinkKinds)
		n("the lock guard, ValidatingAdmissionPolicy initlock-lock-guard, refuses every delete of a lock not marked for release")
		return nil
	})
	var restored time.Time
	tl.step("Restore the backup into another namespace of cluster 2, with initlock's plugin", func(n note) error {
		v, err := dst.StartVelero(d.ctx, true)
		if err != nil {
			return err
		}
		defer dst.StopVelero()
		if err := d.show(n, dst, v, "initlock", "plugin", "get"); err != nil {
			return err
		}
		args := stack.RestoreArgs("seed-initlock", realBackup, "--namespace-mappings", realNamespace+":"+realInitlockNS)
		command(n, "[cluster-2] ", append([]string{"velero"}, args...)...)
		if err := v.RestoreBackup(d.ctx, "seed-initlock", realBackup, "--namespace-mappings", realNamespace+":"+realInitlockNS); err != nil {
			return err
		}
		restored = time.Now()
		return nil
	})
	tl.step("Unpause: initlock-manager re-adopts the lock, the relinker relinks the graph", func(n note) error {
		start := time.Now()
		command(n, "[cluster-2] ", "kubectl", "-n", realInitlockNS, "patch", "cluster", seedCluster, "--type", "merge", "-p", `{"spec":{"paused":false}}`)
		if err := dst.SetPaused(d.ctx, realInitlockNS, seedCluster, false); err != nil {
			return err
		}
		var cm *corev1.ConfigMap
		err := poll(d.ctx, d.opts.Timeout, func(ctx context.Context) error {
			cluster, err := dst.Get(ctx, stack.ClusterGVK, realInitlockNS, seedCluster)
			if err != nil {
				return err
			}
			if cluster == nil {
				return errors.New("the Cluster is not restored yet")
			}
			if cm, err = kubeenv.GetLock(ctx, dst.Client, realInitlockNS, seedCluster); err != nil {
				return err
			}
			if cm == nil {
				return errors.New("the lock is not restored yet")
			}
			if err := kubeenv.LockOwnedBy(cm, cluster); err != nil {
				return err
			}
			left, err := dst.Unlinked(ctx, realInitlockNS, backed, relink.Annotation)
			if err != nil {
				return err
			}
			if len(left) > 0 {
				return fmt.Errorf("not relinked yet: %v", left)
			}
			return nil
		})
		if err != nil {
			return err
		}
		ws, err := dst.Writes()
		if err != nil {
			return err
		}
		writes := 0
		for _, w := range ws {
			if w.User == stack.ManagerUser && w.Namespace == realInitlockNS && !w.At.Before(start) {
				writes++
			}
		}
		n("healed %s after the restore completed: lock %s", duration(time.Since(restored)), describeLock(cm))
		n("every object that had ownerReferences in the backup points at its owner's new UID again")
		n("initlock-manager's writes in the namespace: %d", writes)
		return nil
	})
	tl.step("Delete the Cluster: everything goes with it", func(n note) error {
		command(n, "[cluster-2] ", "kubectl", "-n", realInitlockNS, "delete", "cluster", seedCluster)
		if err := dst.DeleteCluster(d.ctx, realInitlockNS, seedCluster); err != nil {
			return err
		}
		err := poll(d.ctx, d.opts.Timeout, func(ctx context.Context) error {
			left, err := dst.Leftovers(ctx, realInitlockNS)
			if err != nil {
				return err
			}
			if len(left) > 0 {
				return fmt.Errorf("left: %v", left)
			}
			return nil
		})
		if err != nil {
			return err
		}
		n("nothing of the Cluster's graph is left in %s: initlock-manager released the lock of the deleting Cluster (the lock guard refuses the garbage collector's delete), the garbage collector deleted the rest", realInitlockNS)
		return nil
	})
}
