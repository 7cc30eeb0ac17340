package demo

import (
	"errors"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"

	"github.com/initlock/initlock/internal/kubeenv"
	"github.com/initlock/initlock/internal/kubeenv/velerosim"
	"github.com/initlock/initlock/internal/kubeenv/wire"
	"github.com/initlock/initlock/pkg/initlock/capi"
)

// The objects of the seed scenario.
const (
	seedNamespace = "demo-seed"
	seedCluster   = "seed"
	seedMachine   = "seed-cp-0"

	// pausedHold is how long the demo watches a paused Cluster's lock to
	// show that the manager leaves it alone.
	pausedHold = 2 * time.Second
)

// seedStory is what the steps of the seed scenario pass on to each other.
type seedStory struct {
	d                *demo
	cluster, machine *unstructured.Unstructured
	// oldUID is the Cluster's UID before the backup.
	oldUID types.UID
	// backup holds the namespace's objects as Velero backed them up.
	backup []*unstructured.Unstructured
	// lockUID is the restored lock's UID.
	lockUID types.UID
}

// seedScenario: a held lock goes through a Velero backup, the deletion of
// its namespace and a restore; the manager re-adopts it, and the garbage
// collector deletes it with its Cluster.
func (d *demo) seedScenario() {
	tl := d.tl
	tl.chapter("Velero backup and restore", "Velero backup and restore: the lock is re-adopted, then garbage-collected",
		"A restore strips ownerReferences and the Cluster comes back with a new UID. Upstream nothing re-adopts",
		"the lock, so it outlives its Cluster. The operator pauses the Cluster around backup and restore.")
	s := &seedStory{d: d}
	d.lockWrites.take()

	tl.step("Create Cluster "+seedCluster+" and its control-plane Machine "+seedMachine+" in namespace "+seedNamespace, s.create)
	tl.step("Machine "+seedMachine+" takes the init lock with pkg/initlock", s.takeLock)
	tl.step("Pause Cluster "+seedCluster+" (spec.paused: true) before the backup", s.pause)
	tl.step("Back up namespace "+seedNamespace+" as Velero does", s.backUp)
	tl.step("Delete namespace "+seedNamespace+" and wait until it is gone", s.deleteNamespace)
	tl.step("Restore the ConfigMaps, then the Machines: no UIDs, ownerReferences or status", s.restoreLockAndMachine)
	tl.step(fmt.Sprintf("A slow restore: Cluster %s is missing for longer than the orphan grace (%s)", seedCluster, d.opts.OrphanGrace), s.slowRestore)
	tl.step("Restore Cluster "+seedCluster+", still paused: it has a new UID", s.restoreCluster)
	tl.step("The lock is unowned, and left alone while its Cluster is paused", s.unownedWhilePaused)
	tl.step("kubectl initlock list shows it unowned", s.list("unowned"))
	tl.step("Unpause Cluster "+seedCluster+": initlock-manager re-adopts the lock", s.unpause)
	tl.step("kubectl initlock list shows it healthy", s.list("healthy"))
	tl.step("kubectl delete configmap "+seedCluster+wire.LockSuffix+": the lock guard refuses it", s.guardRefusesDelete)
	tl.step("Delete Cluster "+seedCluster+" and its Machine: initlock-manager collects the lock", s.deleteCluster)
}

// create creates the namespace, the Cluster and its control-plane Machine.
func (s *seedStory) create(n note) error {
	d := s.d
	if err := d.createNamespace(seedNamespace); err != nil {
		return err
	}
	var err error
	if s.cluster, err = d.create(kubeenv.NewCluster(d.capiVersion, seedNamespace, seedCluster)); err != nil {
		return err
	}
	if s.machine, err = d.create(kubeenv.NewMachine(d.capiVersion, seedNamespace, seedCluster, seedMachine)); err != nil {
		return err
	}
	s.oldUID = s.cluster.GetUID()
	n("Cluster %s uid %s, Machine %s uid %s", seedCluster, short(s.oldUID), seedMachine, short(s.machine.GetUID()))
	return nil
}

// takeLock has the Machine take its Cluster's lock with the library.
func (s *seedStory) takeLock(n note) error {
	return s.d.takeLock(n, s.cluster, s.machine)
}

// pause pauses the Cluster before the backup, as the operator does.
func (s *seedStory) pause(n note) error {
	if err := s.d.setPaused(s.cluster, true); err != nil {
		return err
	}
	n("Cluster API controllers and initlock-manager leave a paused Cluster alone")
	return nil
}

// backUp reads the namespace's objects as Velero backs them up.
func (s *seedStory) backUp(n note) error {
	var err error
	if s.backup, err = velerosim.Backup(s.d.ctx, s.d.c, seedNamespace, backedUpKinds...); err != nil {
		return err
	}
	n("backed up %s", countKinds(s.backup))
	return nil
}

// deleteNamespace deletes the namespace and everything in it.
func (s *seedStory) deleteNamespace(n note) error {
	if err := s.d.deleteNamespace(seedNamespace); err != nil {
		return err
	}
	n("the namespace controller deleted the Cluster, the Machine and the lock")
	return nil
}

// restoreLockAndMachine restores the ConfigMaps and the Machines, in
// Velero's order, before the Cluster.
func (s *seedStory) restoreLockAndMachine(n note) error {
	d := s.d
	if err := d.createNamespace(seedNamespace); err != nil {
		return err
	}
	cms, err := d.restore(s.backup, "ConfigMap")
	if err != nil {
		return err
	}
	machines, err := d.restore(s.backup, "Machine")
	if err != nil {
		return err
	}
	cm, err := kubeenv.GetLock(d.ctx, d.c, seedNamespace, seedCluster)
	if err != nil {
		return err
	}
	if cm == nil {
		return fmt.Errorf("the backup held no lock %s%s", seedCluster, wire.LockSuffix)
	}
	s.lockUID = cm.UID
	n("restored %d ConfigMap and %d Machine; Cluster %s is not back yet", len(cms), len(machines), seedCluster)
	n("lock %s", describeLock(cm))
	n("Machine %s is back with a new UID", seedMachine)
	return nil
}

// slowRestore shows that the manager records the absence of a lock's
// Cluster and, once the grace period has passed, still keeps the lock
// because its holder Machine exists.
func (s *seedStory) slowRestore(n note) error {
	d := s.d
	d.lockWrites.take()
	cm, err := d.waitLock(seedNamespace, seedCluster, func(cm *corev1.ConfigMap) error {
		switch {
		case cm == nil:
			return fmt.Errorf("%w: the lock is gone", errStop)
		case cm.Annotations[wire.ClusterAbsentAnnotation] == "":
			return errors.New("initlock-manager has not recorded the Cluster's absence yet")
		}
		return nil
	})
	if err != nil {
		return err
	}
	mark := cm.Annotations[wire.ClusterAbsentAnnotation]
	seen := time.Now()
	n("initlock-manager recorded the absence on the lock: %s=%q", wire.ClusterAbsentAnnotation, mark)
	n("the mark names the lock's UID (%s): a lock restored again later starts a new grace period", short(s.lockUID))
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
	if dec.Verdict != "orphan" || dec.Action != "none" {
		return fmt.Errorf("verdict %s and action %s, want verdict orphan and action none", dec.Verdict, dec.Action)
	}
	_, writes := d.lockWrites.take()
	n("%s later: still there, verdict %s, action %s: its holder Machine %s exists, so the restore may still",
		duration(time.Since(seen)), dec.Verdict, dec.Action, dec.Holder)
	n("be bringing the Cluster back (initlock-manager's writes to the lock: %s)", writes)
	return nil
}

// restoreCluster restores the Cluster, which comes back with a new UID.
func (s *seedStory) restoreCluster(n note) error {
	restored, err := s.d.restore(s.backup, "Cluster")
	if err != nil {
		return err
	}
	if len(restored) != 1 {
		return fmt.Errorf("restored %d Clusters, want 1", len(restored))
	}
	s.cluster = restored[0]
	if s.cluster.GetUID() == s.oldUID {
		return fmt.Errorf("the restored Cluster kept its UID %s", s.oldUID)
	}
	n("Cluster %s uid %s (was %s), spec.paused kept from the backup", seedCluster, short(s.cluster.GetUID()), short(s.oldUID))
	n("its grant register %s is back too: %s", wire.GrantAnnotation, s.cluster.GetAnnotations()[wire.GrantAnnotation])
	return nil
}

// unownedWhilePaused shows that the restored lock is unowned and that the
// manager does not touch it while its Cluster is paused.
func (s *seedStory) unownedWhilePaused(n note) error {
	d := s.d
	cm, dec, err := d.observe(seedNamespace, seedCluster)
	if err != nil {
		return err
	}
	if dec.Verdict != "unowned" {
		return fmt.Errorf("verdict %s, want unowned: %s", dec.Verdict, describeLock(cm))
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
}

// list runs kubectl initlock list on the seed's namespace and checks that
// it shows the verdict.
func (s *seedStory) list(verdict string) func(note) error {
	return func(n note) error {
		return s.d.kubectlInitlock(n, verdict, "list", "-n", seedNamespace)
	}
}

// unpause unpauses the restored Cluster and shows the manager re-adopting
// its lock.
func (s *seedStory) unpause(n note) error {
	d := s.d
	d.lockWrites.take()
	if err := d.setPaused(s.cluster, false); err != nil {
		return err
	}
	started := time.Now()
	cm, err := d.waitAdopted(s.cluster)
	if err != nil {
		return err
	}
	n("re-adopted %s after the unpause: %s", duration(time.Since(started)), describeLock(cm))
	_, writes := d.lockWrites.take()
	n("initlock-manager's writes to the lock: %s (new owner and the mark removed together)", writes)
	ev, err := d.event(seedNamespace, "LockAdopted", "Cluster", seedCluster)
	if err != nil {
		return err
	}
	n("event %s on Cluster %s: %s", ev.Reason, seedCluster, ev.Note)
	return nil
}

// waitAdopted waits until the seed's lock is owned by cluster and no longer
// carries the cluster-absent mark, and returns it.
func (d *demo) waitAdopted(cluster *unstructured.Unstructured) (*corev1.ConfigMap, error) {
	return d.waitLock(seedNamespace, seedCluster, func(cm *corev1.ConfigMap) error {
		switch {
		case cm == nil:
			return fmt.Errorf("%w: the lock is gone", errStop)
		case cm.Annotations[wire.ClusterAbsentAnnotation] != "":
			return errors.New("the lock still carries its cluster-absent mark")
		}
		return kubeenv.LockOwnedBy(cm, cluster)
	})
}

// guardRefusesDelete deletes the held lock as an operator might, and shows
// the lock guard refusing it.
func (s *seedStory) guardRefusesDelete(n note) error {
	d := s.d
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
}

// deleteCluster deletes the Cluster and its Machine and waits for the
// manager to collect the lock.
func (s *seedStory) deleteCluster(n note) error {
	d := s.d
	d.lockWrites.take()
	if err := d.c.Delete(d.ctx, s.cluster); err != nil {
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
	n("the lock guard refuses the garbage collector's delete; lock %s%s gone %s after its Cluster, once its Cluster was absent for the orphan grace and its holder was gone; initlock-manager's writes: %s (its absence recorded, the release mark, then the delete)", seedCluster, wire.LockSuffix, duration(time.Since(started)), writes)
	return nil
}
