package demo

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/cli-runtime/pkg/genericiooptions"

	"github.com/initlock/initlock/internal/cli"
	"github.com/initlock/initlock/internal/kubeenv"
	"github.com/initlock/initlock/pkg/initlock"
	"github.com/initlock/initlock/pkg/initlock/capi"
	"github.com/initlock/initlock/pkg/initlock/engine"
)

// The objects of the story.
const (
	seedNamespace = "demo-seed"
	seedCluster   = "seed"
	seedMachine   = "seed-cp-0"

	soloNamespace = "demo-single-node"
	soloCluster   = "solo"
	soloMachine   = "solo-cp-0"

	// pausedHold is how long the demo watches a paused Cluster's lock to
	// show that the manager leaves it alone.
	pausedHold = 2 * time.Second
)

// seedScenario: a held lock goes through a Velero backup, the deletion of
// its namespace and a restore; the manager re-adopts it, and the garbage
// collector deletes it with its Cluster.
func (d *demo) seedScenario() {
	tl := d.tl
	tl.chapter("Velero backup and restore", "Velero backup and restore: the lock is re-adopted, then garbage-collected",
		"A restore strips ownerReferences and the Cluster comes back with a new UID. Upstream nothing re-adopts",
		"the lock, so it outlives its Cluster. The operator pauses the Cluster around backup and restore.")
	var (
		cluster, machine *unstructured.Unstructured
		oldUID           types.UID
		backup           []*unstructured.Unstructured
	)
	d.lockWrites.take()

	tl.step("Create Cluster "+seedCluster+" and its control-plane Machine "+seedMachine+" in namespace "+seedNamespace, func(n note) error {
		if err := d.createNamespace(seedNamespace); err != nil {
			return err
		}
		var err error
		if cluster, err = d.createCluster(seedNamespace, seedCluster); err != nil {
			return err
		}
		if machine, err = d.createMachine(seedNamespace, seedCluster, seedMachine); err != nil {
			return err
		}
		oldUID = cluster.GetUID()
		n("Cluster %s uid %s, Machine %s uid %s", seedCluster, short(oldUID), seedMachine, short(machine.GetUID()))
		return nil
	})

	tl.step("Machine "+seedMachine+" takes the init lock with pkg/initlock", func(n note) error {
		return d.takeLock(n, cluster, machine)
	})

	tl.step("Pause Cluster "+seedCluster+" (spec.paused: true) before the backup", func(n note) error {
		if err := d.setPaused(cluster, true); err != nil {
			return err
		}
		n("Cluster API controllers and initlock-manager leave a paused Cluster alone")
		return nil
	})

	tl.step("Back up namespace "+seedNamespace+" as Velero does", func(n note) error {
		var err error
		if backup, err = d.backup(seedNamespace); err != nil {
			return err
		}
		n("backed up %s", countKinds(backup))
		return nil
	})

	tl.step("Delete namespace "+seedNamespace+" and wait until it is gone", func(n note) error {
		if err := d.deleteNamespace(seedNamespace); err != nil {
			return err
		}
		n("the namespace controller deleted the Cluster, the Machine and the lock")
		return nil
	})

	var lockUID types.UID
	tl.step("Restore the ConfigMaps, then the Machines: no UIDs, ownerReferences or status", func(n note) error {
		if err := d.createNamespace(seedNamespace); err != nil {
			return err
		}
		cms, err := d.restore(backup, "ConfigMap")
		if err != nil {
			return err
		}
		machines, err := d.restore(backup, capi.MachineKind)
		if err != nil {
			return err
		}
		cm, err := kubeenv.GetLock(d.ctx, d.c, seedNamespace, seedCluster)
		if err != nil {
			return err
		}
		if cm == nil {
			return fmt.Errorf("the backup held no lock %s%s", seedCluster, engine.LockSuffix)
		}
		lockUID = cm.UID
		n("restored %d ConfigMap and %d Machine; Cluster %s is not back yet", len(cms), len(machines), seedCluster)
		n("lock %s", describeLock(cm))
		n("Machine %s is back with a new UID", seedMachine)
		return nil
	})

	tl.step(fmt.Sprintf("A slow restore: Cluster %s is missing for longer than the orphan grace (%s)", seedCluster, d.opts.OrphanGrace), func(n note) error {
		return d.slowRestore(n, lockUID)
	})

	tl.step("Restore Cluster "+seedCluster+", still paused: it has a new UID", func(n note) error {
		restored, err := d.restore(backup, capi.ClusterKind)
		if err != nil {
			return err
		}
		if len(restored) != 1 {
			return fmt.Errorf("restored %d Clusters, want 1", len(restored))
		}
		cluster = restored[0]
		if cluster.GetUID() == oldUID {
			return fmt.Errorf("the restored Cluster kept its UID %s", oldUID)
		}
		n("Cluster %s uid %s (was %s), spec.paused kept from the backup", seedCluster, short(cluster.GetUID()), short(oldUID))
		n("its grant register %s is back too: %s", engine.GrantAnnotation, cluster.GetAnnotations()[engine.GrantAnnotation])
		return nil
	})

	tl.step("The lock is unowned, and left alone while its Cluster is paused", func(n note) error {
		cm, dec, err := d.observe(seedNamespace, seedCluster)
		if err != nil {
			return err
		}
		if dec.Verdict != engine.VerdictUnowned {
			return fmt.Errorf("verdict %s, want %s: %s", dec.Verdict, engine.VerdictUnowned, describeLock(cm))
		}
		n("verdict %s (owner %s): %s", dec.Verdict, dec.Owner, describeLock(cm))
		n("the garbage collector will never delete an unowned lock, and the upstream provider never re-adopts it")
		if err := sleep(d.ctx, pausedHold); err != nil {
			return err
		}
		after, err := kubeenv.GetLock(d.ctx, d.c, seedNamespace, seedCluster)
		if err != nil {
			return err
		}
		if after == nil || after.ResourceVersion != cm.ResourceVersion {
			return fmt.Errorf("the lock changed while its Cluster was paused: %s", describeLock(after))
		}
		n("resourceVersion %s unchanged after %s", cm.ResourceVersion, pausedHold)
		return nil
	})

	tl.step("kubectl initlock list shows it unowned", func(n note) error {
		return d.kubectlInitlock(n, engine.VerdictUnowned, "list", "-n", seedNamespace)
	})

	tl.step("Unpause Cluster "+seedCluster+": initlock-manager re-adopts the lock", func(n note) error {
		d.lockWrites.take()
		if err := d.setPaused(cluster, false); err != nil {
			return err
		}
		started := time.Now()
		var cm *corev1.ConfigMap
		err := poll(d.ctx, d.opts.Timeout, func(context.Context) error {
			var err error
			if cm, err = kubeenv.GetLock(d.ctx, d.c, seedNamespace, seedCluster); err != nil {
				return err
			}
			switch {
			case cm == nil:
				return fmt.Errorf("%w: the lock is gone", errStop)
			case !ownedBy(cm, cluster):
				return fmt.Errorf("lock %s", describeLock(cm))
			case cm.Annotations[engine.ClusterAbsentAnnotation] != "":
				return errors.New("the lock still carries its cluster-absent mark")
			}
			return nil
		})
		if err != nil {
			return err
		}
		n("re-adopted %s after the unpause: %s", duration(time.Since(started)), describeLock(cm))
		_, writes := d.lockWrites.take()
		n("initlock-manager's writes to the lock: %s (new owner and the mark removed together)", writes)
		ev, err := d.event(seedNamespace, "LockAdopted", capi.ClusterKind, seedCluster)
		if err != nil {
			return err
		}
		n("event %s on Cluster %s: %s", ev.Reason, seedCluster, ev.Note)
		return nil
	})

	tl.step("kubectl initlock list shows it healthy", func(n note) error {
		return d.kubectlInitlock(n, engine.VerdictHealthy, "list", "-n", seedNamespace)
	})

	tl.step("kubectl delete configmap "+seedCluster+engine.LockSuffix+": the lock guard refuses it", func(n note) error {
		cm, err := kubeenv.GetLock(d.ctx, d.c, seedNamespace, seedCluster)
		if err != nil {
			return err
		}
		if cm == nil {
			return errors.New("the lock is gone")
		}
		err = d.c.Delete(d.ctx, cm)
		if !apierrors.IsForbidden(err) {
			return fmt.Errorf("deleting lock %s/%s: got %w, want a refusal of the lock guard", seedNamespace, cm.Name, err)
		}
		n("an operator \"unsticks\" the cluster while %s may be running kubeadm init; upstream, the next Machine would be granted the lock", seedMachine)
		n("the API server refuses: %s", err)
		if cm, err = kubeenv.GetLock(d.ctx, d.c, seedNamespace, seedCluster); err != nil {
			return err
		}
		if cm == nil || cm.DeletionTimestamp != nil {
			return fmt.Errorf("lock %s: want it there, not being deleted", describeLock(cm))
		}
		n("the lock stays as it was, held (and so in every backup): %s", describeLock(cm))
		return nil
	})

	tl.step("Delete Cluster "+seedCluster+" and its Machine: initlock-manager collects the lock", func(n note) error {
		d.lockWrites.take()
		if err := d.c.Delete(d.ctx, cluster); err != nil {
			return fmt.Errorf("deleting cluster %s/%s: %w", seedNamespace, seedCluster, err)
		}
		machine := &unstructured.Unstructured{}
		machine.SetGroupVersionKind(capi.MachineGVK(d.capiVersion))
		machine.SetNamespace(seedNamespace)
		machine.SetName(seedMachine)
		if err := d.c.Delete(d.ctx, machine); err != nil && !apierrors.IsNotFound(err) {
			return fmt.Errorf("deleting machine %s/%s: %w", seedNamespace, seedMachine, err)
		}
		started := time.Now()
		if err := d.waitLockGone(seedNamespace, seedCluster); err != nil {
			return err
		}
		_, writes := d.lockWrites.take()
		n("the lock guard refuses the garbage collector's delete; lock %s%s gone %s after its Cluster, once its Cluster was absent for the orphan grace and its holder was gone; initlock-manager's writes: %s (its absence recorded, the release mark, then the delete)", seedCluster, engine.LockSuffix, duration(time.Since(started)), writes)
		return nil
	})
}

// takeLock acquires cluster's lock for machine with the library, as a
// bootstrap provider does, and shows the lock and the grant it recorded.
func (d *demo) takeLock(n note, cluster, machine *unstructured.Unstructured) error {
	res, err := d.locker.Lock(d.ctx, cluster, machine)
	if err != nil {
		return err
	}
	if !res.Acquired {
		return fmt.Errorf("lock not acquired: held by %s (verdict %s)", res.Holder, res.Verdict)
	}
	cm, err := kubeenv.GetLock(d.ctx, d.c, cluster.GetNamespace(), cluster.GetName())
	if err != nil {
		return err
	}
	if cm == nil {
		return errors.New("acquired, yet there is no lock ConfigMap")
	}
	n("acquired (action %s): lock %s", res.Action, describeLock(cm))
	n("%s: %s", engine.DataKey, cm.Data[engine.DataKey])
	n("grant register on Cluster %s: %s", cluster.GetName(), cluster.GetAnnotations()[engine.GrantAnnotation])
	return nil
}

// slowRestore shows that the manager records the absence of a lock's
// Cluster and, once the grace period has passed, still keeps the lock
// because its holder Machine exists.
func (d *demo) slowRestore(n note, lockUID types.UID) error {
	d.lockWrites.take()
	var mark string
	err := poll(d.ctx, d.opts.Timeout, func(context.Context) error {
		cm, err := kubeenv.GetLock(d.ctx, d.c, seedNamespace, seedCluster)
		if err != nil {
			return err
		}
		if cm == nil {
			return fmt.Errorf("%w: the lock is gone", errStop)
		}
		if mark = cm.Annotations[engine.ClusterAbsentAnnotation]; mark == "" {
			return errors.New("initlock-manager has not recorded the Cluster's absence yet")
		}
		return nil
	})
	if err != nil {
		return err
	}
	seen := time.Now()
	n("initlock-manager recorded the absence on the lock: %s=%q", engine.ClusterAbsentAnnotation, mark)
	n("the mark names the lock's UID (%s): a lock restored again later starts a new grace period", short(lockUID))
	// The manager looks again when the grace period is over; give it a
	// moment beyond that.
	if err := sleep(d.ctx, d.opts.OrphanGrace+1500*time.Millisecond); err != nil {
		return err
	}
	cm, dec, err := d.observe(seedNamespace, seedCluster)
	if err != nil {
		return err
	}
	if cm == nil {
		return errors.New("the lock was collected although its holder Machine exists")
	}
	if dec.Verdict != engine.VerdictOrphan || dec.Action != engine.ActionNone {
		return fmt.Errorf("decision %s, want verdict %s and action %s", dec, engine.VerdictOrphan, engine.ActionNone)
	}
	_, writes := d.lockWrites.take()
	n("%s later: still there, verdict %s, action %s: its holder Machine %s exists, so the restore may still",
		duration(time.Since(seen)), dec.Verdict, dec.Action, dec.Holder)
	n("be bringing the Cluster back (initlock-manager's writes to the lock: %s)", writes)
	return nil
}

// singleNode: the only control-plane Machine of a Cluster takes the lock,
// the control plane is initialised, and the manager releases the lock.
func (d *demo) singleNode() {
	tl := d.tl
	tl.chapter("Single-node cluster", "A single-node cluster: the lock is released once the control plane is initialised",
		"Upstream releases the lock only when another control-plane Machine joins, so a cluster with one",
		"control-plane Machine keeps it for as long as the Cluster exists.")
	var cluster, machine *unstructured.Unstructured

	tl.step("Create Cluster "+soloCluster+" and its only control-plane Machine "+soloMachine+"; it takes the init lock", func(n note) error {
		if err := d.createNamespace(soloNamespace); err != nil {
			return err
		}
		var err error
		if cluster, err = d.createCluster(soloNamespace, soloCluster); err != nil {
			return err
		}
		if machine, err = d.createMachine(soloNamespace, soloCluster, soloMachine); err != nil {
			return err
		}
		return d.takeLock(n, cluster, machine)
	})

	var initialised time.Time
	tl.step("The control plane is initialised (Cluster status, through the status subresource)", func(n note) error {
		d.lockWrites.take()
		u, err := d.getCluster(soloNamespace, soloCluster)
		if err != nil {
			return err
		}
		if u == nil {
			return fmt.Errorf("cluster %s/%s is gone", soloNamespace, soloCluster)
		}
		if err := kubeenv.SetInitialized(d.ctx, d.c, u); err != nil {
			return err
		}
		initialised = time.Now()
		if !capi.IsControlPlaneInitialized(u) {
			return errors.New("the status written does not read as initialised")
		}
		n("status.initialization.controlPlaneInitialized: true, condition %s: True", capi.ControlPlaneInitializedCondition)
		return nil
	})

	tl.step("initlock-manager releases the lock", func(n note) error {
		if err := d.waitLockGone(soloNamespace, soloCluster); err != nil {
			return err
		}
		took := time.Since(initialised)
		_, writes := d.lockWrites.take()
		n("released %s after the status change; initlock-manager's writes: %s (UID and resourceVersion preconditions)", duration(took), writes)
		ev, err := d.event(soloNamespace, "LockReleased", capi.ClusterKind, soloCluster)
		if err != nil {
			return err
		}
		n("event %s on Cluster %s: %s", ev.Reason, soloCluster, ev.Note)
		return nil
	})
}

// managerMetrics shows the manager's Prometheus metrics for what it did.
func (d *demo) managerMetrics() {
	tl := d.tl
	tl.chapter("Metrics", "What initlock-manager reports")
	tl.step("Read initlock-manager's Prometheus metrics", func(n note) error {
		lines, err := scrape(d.ctx, d.metricsAddr)
		if err != nil {
			return err
		}
		values := map[string]float64{}
		for _, l := range lines {
			name, v, ok := strings.Cut(l, " ")
			if !ok || strings.Contains(name, "_bucket") {
				continue
			}
			f, err := strconv.ParseFloat(v, 64)
			if err != nil || (f == 0 && !strings.HasSuffix(name, "_total")) {
				continue
			}
			values[name] = f
			n("%s", l)
		}
		if values["initlock_lock_adoptions_total"] < 1 {
			return errors.New("initlock_lock_adoptions_total is below 1")
		}
		if values[`initlock_lock_releases_total{reason="initialized"}`] < 1 {
			return errors.New(`initlock_lock_releases_total{reason="initialized"} is below 1`)
		}
		return nil
	})
}

// kubectlInitlock runs the kubectl plugin in this process, shows its output
// and checks that it reports the verdict.
func (d *demo) kubectlInitlock(n note, verdict initlock.Verdict, args ...string) error {
	var out, errOut bytes.Buffer
	n("$ kubectl initlock %s", strings.Join(args, " "))
	code := cli.Execute(d.ctx, cli.Options{
		IOStreams: genericiooptions.IOStreams{In: strings.NewReader(""), Out: &out, ErrOut: &errOut},
	}, append(args, "--kubeconfig", d.kubeconfig))
	for _, l := range strings.Split(strings.TrimRight(out.String(), "\n"), "\n") {
		n("  %s", l)
	}
	if code != cli.ExitOK {
		return fmt.Errorf("kubectl initlock %s exited %d: %s", strings.Join(args, " "), code, strings.TrimSpace(errOut.String()))
	}
	if !strings.Contains(out.String(), " "+string(verdict)) {
		return fmt.Errorf("kubectl initlock %s does not show the verdict %s", strings.Join(args, " "), verdict)
	}
	return nil
}
