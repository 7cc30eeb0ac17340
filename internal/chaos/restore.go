package chaos

import (
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"time"

	velerov1 "github.com/vmware-tanzu/velero/pkg/apis/velero/v1"
	riav2 "github.com/vmware-tanzu/velero/pkg/plugin/velero/restoreitemaction/v2"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/initlock/initlock/internal/kubeenv"
	"github.com/initlock/initlock/internal/kubeenv/velerosim"
	"github.com/initlock/initlock/internal/kubeenv/wire"
	"github.com/initlock/initlock/internal/velero"
	"github.com/initlock/initlock/pkg/initlock/capi"
)

// restore backs a Cluster up, loses it (Cluster, Machines and lock) and
// restores it as the plan says. It tells whether the Cluster is gone for
// good (deleted mid-restore).
func (r *runner) restore(ctx context.Context, crt *clusterRT, rp *RestorePlan) (bool, error) {
	name := crt.plan.Name
	r.mu.Lock()
	r.res.Restores[rp.Mode+" "+rp.Order]++
	r.mu.Unlock()
	if rp.Paused {
		if err := r.setPaused(ctx, name, true); err != nil {
			return false, err
		}
	}
	items, err := r.backup(ctx, name)
	if err != nil {
		return false, err
	}
	if err := r.deleteCluster(ctx, name); err != nil {
		return false, err
	}
	r.c.LockLost("driver", name)
	if err := r.releaseLock(ctx, name, "the disaster took the lock too"); err != nil {
		return false, err
	}
	rs, err := r.newRestore(rp.Mode)
	if err != nil {
		return false, err
	}
	rnd := rand.New(rand.NewPCG(rp.Shuffle, 1))
	switch rp.Order {
	case OrderReverse:
		slices.Reverse(items)
	case OrderRandom:
		rnd.Shuffle(len(items), func(i, j int) { items[i], items[j] = items[j], items[i] })
	}
	abortAt := -1
	if rp.Abort >= 0 {
		abortAt = int(rp.Abort * float64(len(items)))
	}
	sleep(ctx, time.Duration(rnd.Int64N(int64(rp.Gap)+1)))
	for i, it := range items {
		if i == abortAt {
			r.h.Add("driver", "cluster deleted mid-restore", name, "", fmt.Sprintf("after %d of %d objects", i, len(items)))
			return true, r.deleteCluster(ctx, name)
		}
		if err := r.restoreItem(ctx, rs, it); err != nil {
			return false, err
		}
		sleep(ctx, time.Duration(rnd.Int64N(int64(rp.Gap)+1)))
	}
	if abortAt == len(items) {
		r.h.Add("driver", "cluster deleted after restore", name, "", "")
		return true, r.deleteCluster(ctx, name)
	}
	if err := r.afterRestore(ctx, name, rp.StatusAfter); err != nil {
		return false, err
	}
	if rp.Paused {
		sleep(ctx, rp.UnpauseAfter)
		if err := r.setPaused(ctx, name, false); err != nil {
			return false, err
		}
	}
	return false, nil
}

// restoreOld deletes a Cluster, and only the Cluster, and creates it again
// from an older copy of its object, as a Velero restore of an old backup
// does: its grant register is older or absent and its UID is new. The
// Machines stay; the garbage collector deletes the lock, which the old
// Cluster owned. The copy is the Cluster as setup created it (fromSetup,
// no register at all) or as read age before the restore.
func (r *runner) restoreOld(ctx context.Context, name string, age time.Duration, fromSetup bool) error {
	snap := r.snapshots[name]
	if !fromSetup {
		snap = r.clusterObject(name)
		if err := r.admin.Get(ctx, client.ObjectKeyFromObject(snap), snap); err != nil {
			return err
		}
		sleep(ctx, age)
	}
	r.h.Add("driver", "old backup", name, snap.GetResourceVersion(), grantDetail(snap.GetAnnotations()[wire.GrantAnnotation]))
	r.c.LockLost("driver", name)
	r.c.ClusterDeleting(name)
	if err := r.admin.Delete(ctx, r.clusterObject(name)); err != nil && !apierrors.IsNotFound(err) {
		return err
	}
	r.h.Add("driver", "cluster deleted", name, "", "to be restored from the old backup")
	if err := r.waitClusterGone(ctx, name); err != nil {
		return err
	}
	rs, err := r.newRestore(ModeVelero)
	if err != nil {
		return err
	}
	if err := r.restoreItem(ctx, rs, snap); err != nil {
		return err
	}
	return r.afterRestore(ctx, name, 0)
}

// partialRestore backs a Cluster up and loses it (Cluster, Machines, lock
// and add-on); an unrelated Cluster takes its name; the backup is then
// restored Velero-style, and the restore skips the Cluster, which exists:
// the Machines, the lock and the add-on come back without their own
// Cluster. The relinker must leave the add-on unlinked (invariant 5); the
// lock controller adopts the lock, which belongs to whatever Cluster has
// its name.
func (r *runner) partialRestore(ctx context.Context, crt *clusterRT) error {
	name := crt.plan.Name
	items, err := r.backup(ctx, name)
	if err != nil {
		return err
	}
	if err := r.deleteCluster(ctx, name); err != nil {
		return err
	}
	if err := r.deleteLock(ctx, name, "the disaster took the lock too"); err != nil {
		return err
	}
	unrelated := kubeenv.NewCluster(capi.V1Beta2, r.ns, name)
	unrelated.SetLabels(map[string]string{"chaos.initlock.dev/unrelated": "true"})
	if crt.plan.Finalizer {
		unrelated.SetFinalizers([]string{finalizer})
	}
	if err := r.admin.Create(ctx, unrelated); err != nil {
		return fmt.Errorf("creating an unrelated cluster %s: %w", name, err)
	}
	r.c.ClusterCreated(name, unrelated.GetUID(), nil)
	r.h.Add("driver", "unrelated cluster", name, unrelated.GetResourceVersion(), "uid="+shortUID(string(unrelated.GetUID())))
	rs, err := r.newRestore(ModeVelero)
	if err != nil {
		return err
	}
	for _, it := range items {
		if it.GetKind() == "Cluster" {
			r.h.Add("driver", "restore skipped", it.GetKind()+"/"+it.GetName(), "", "a cluster of that name exists")
			continue
		}
		if err := r.restoreItem(ctx, rs, it); err != nil {
			return err
		}
	}
	return r.afterRestore(ctx, name, 0)
}

// afterRestore gives a restored Cluster whose control plane was initialised
// its status back after statusAfter, as Cluster API recomputes it.
func (r *runner) afterRestore(ctx context.Context, name string, statusAfter time.Duration) error {
	if !r.c.Initialized(name) {
		return nil
	}
	sleep(ctx, statusAfter)
	return r.setStatusInitialized(ctx, name)
}

// restore is one restore: a velerosim Restorer that creates objects in the
// order it is given them, and the restore's name, "" for a naive copy.
type restore struct {
	*velerosim.Restorer
	name string
}

// newRestore returns a restore of a mode: a Velero restore of its own,
// with initlock's plugin and a name no other restore of the scenario has,
// or the naive copier.
func (r *runner) newRestore(mode string) (restore, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if mode == ModeNaive {
		if r.naive == nil {
			var err error
			if r.naive, err = velerosim.New(r.o.Config, velerosim.Options{Naive: true, AsGiven: true}); err != nil {
				return restore{}, err
			}
		}
		return restore{Restorer: r.naive}, nil
	}
	r.restores++
	name := fmt.Sprintf("chaos-restore-%d", r.restores)
	cfg := velero.DefaultConfig()
	rs, err := velerosim.New(r.o.Config, velerosim.Options{AsGiven: true, BackupName: "chaos-backup", RestoreName: name,
		Actions: []riav2.RestoreItemAction{velero.NewAction(cfg, false, nil), velero.NewAction(cfg, true, nil)}})
	if err != nil {
		return restore{}, err
	}
	return restore{Restorer: rs, name: name}, nil
}

// restoreItem creates one backed-up object again with rs, and records the
// new UIDs of Clusters and Machines, and which restore created Clusters and
// add-ons. An object that exists already is skipped.
func (r *runner) restoreItem(ctx context.Context, rs restore, backed *unstructured.Unstructured) error {
	what := backed.GetKind() + "/" + backed.GetName()
	out, err := rs.Restore(ctx, []*unstructured.Unstructured{backed})
	switch {
	case apierrors.IsAlreadyExists(err):
		r.h.Add("driver", "restore skipped", what, "", "exists already")
		return nil
	case err != nil:
		return err
	case len(out) != 1:
		return fmt.Errorf("restoring %s: %d objects created", what, len(out))
	}
	obj := out[0]
	switch {
	case obj.GetKind() == "Cluster":
		r.c.ClusterCreated(obj.GetName(), obj.GetUID(), wire.GrantFrom(obj.GetAnnotations()))
		switch restored := obj.GetLabels()[velerov1.RestoreNameLabel]; {
		case rs.name != "":
			r.c.ClusterRestored(obj.GetUID(), rs.name)
		case restored != "":
			// A naive copy of a Cluster that a restore created keeps that
			// restore's label: a copy of that very Cluster, which the link
			// rule takes for it (docs/design.md, the relinker).
			r.c.ClusterRestored(obj.GetUID(), restored)
		}
	case obj.GetKind() == "Machine":
		r.c.MachineCreated(obj.GetName(), obj.GetUID())
	case strings.HasSuffix(obj.GetName(), addOnSuffix) && rs.name != "":
		var backedUp types.UID
		for _, ref := range backed.GetOwnerReferences() {
			if ref.Kind == "Cluster" {
				backedUp = ref.UID
			}
		}
		r.c.AddOnRestored(obj.GetUID(), rs.name, backedUp)
	}
	r.h.Add("driver", "restored", what, obj.GetResourceVersion(), "uid="+shortUID(string(obj.GetUID()))+" "+rs.name)
	return nil
}

// backup reads a Cluster's add-on, its lock, its Machines and the Cluster,
// one after the other as Velero does, in Velero's restore order, and
// records the backup.
func (r *runner) backup(ctx context.Context, name string) ([]*unstructured.Unstructured, error) {
	var objs []client.Object
	addOn := &corev1.ConfigMap{}
	if err := r.admin.Get(ctx, client.ObjectKey{Namespace: r.ns, Name: name + addOnSuffix}, addOn); client.IgnoreNotFound(err) != nil {
		return nil, err
	} else if err == nil {
		objs = append(objs, addOn)
	}
	if cm, err := r.lockOf(ctx, name); err != nil {
		return nil, err
	} else if cm != nil {
		objs = append(objs, cm)
	}
	items, err := velerosim.Unstructured(objs...)
	if err != nil {
		return nil, err
	}
	machines := &unstructured.UnstructuredList{}
	machines.SetGroupVersionKind(capi.MachineGVK(capi.V1Beta2).GroupVersion().WithKind("MachineList"))
	if err := r.admin.List(ctx, machines, client.InNamespace(r.ns), client.MatchingLabels{capi.ClusterNameLabel: name}); err != nil {
		return nil, err
	}
	for i := range machines.Items {
		items = append(items, &machines.Items[i])
	}
	cluster := r.clusterObject(name)
	if err := r.admin.Get(ctx, client.ObjectKeyFromObject(cluster), cluster); err != nil {
		return nil, err
	}
	r.h.Addf("driver", "backup", name, "%d objects", len(items)+1)
	return append(items, cluster), nil
}
