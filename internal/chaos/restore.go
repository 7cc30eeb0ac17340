package chaos

import (
	"context"
	"fmt"
	"math/rand/v2"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/initlock/initlock/internal/capi"
	"github.com/initlock/initlock/pkg/initlock"
)

// backup is what a backup holds of one Cluster.
type backup struct {
	items []*unstructured.Unstructured
}

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
	b, err := r.backup(ctx, name)
	if err != nil {
		return false, err
	}
	r.h.Addf("driver", "backup", name, "%d objects", len(b.items))
	if err := r.deleteCluster(ctx, name); err != nil {
		return false, err
	}
	if err := r.deleteLock(ctx, name, "the disaster took the lock too"); err != nil {
		return false, err
	}
	rnd := rand.New(rand.NewPCG(rp.Shuffle, 1))
	items := b.items // velero order: lock, machines, cluster
	switch rp.Order {
	case OrderReverse:
		for i, j := 0, len(items)-1; i < j; i, j = i+1, j-1 {
			items[i], items[j] = items[j], items[i]
		}
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
		obj := strip(it, rp.Mode)
		err := r.admin.Create(ctx, obj)
		switch {
		case apierrors.IsAlreadyExists(err):
			r.h.Add("driver", "restore skipped", it.GetKind()+"/"+it.GetName(), "", "exists already")
		case err != nil:
			return false, fmt.Errorf("restoring %s %s: %w", it.GetKind(), it.GetName(), err)
		default:
			r.h.Add("driver", "restored", it.GetKind()+"/"+it.GetName(), obj.GetResourceVersion(), "uid="+shortUID(string(obj.GetUID())))
		}
		sleep(ctx, time.Duration(rnd.Int64N(int64(rp.Gap)+1)))
	}
	if abortAt == len(items) {
		r.h.Add("driver", "cluster deleted after restore", name, "", "")
		return true, r.deleteCluster(ctx, name)
	}
	if r.c.Initialised(name) {
		sleep(ctx, rp.StatusAfter)
		if err := r.setStatusInitialised(ctx, name); err != nil {
			return false, err
		}
	}
	if rp.Paused {
		sleep(ctx, rp.UnpauseAfter)
		if err := r.setPaused(ctx, name, false); err != nil {
			return false, err
		}
	}
	return false, nil
}

// backup reads a Cluster, its Machines and its lock, one after the other as
// Velero does, in Velero's restore order.
func (r *runner) backup(ctx context.Context, name string) (*backup, error) {
	b := &backup{}
	cm := &corev1.ConfigMap{}
	err := r.admin.Get(ctx, client.ObjectKey{Namespace: r.ns, Name: name + initlock.LockSuffix}, cm)
	switch {
	case apierrors.IsNotFound(err):
	case err != nil:
		return nil, err
	case initlock.ObserveLock(cm, name).Problem == nil:
		u, err := toUnstructured(cm)
		if err != nil {
			return nil, err
		}
		b.items = append(b.items, u)
	}
	machines := &unstructured.UnstructuredList{}
	machines.SetGroupVersionKind(capi.MachineGVK(capi.V1Beta2).GroupVersion().WithKind("MachineList"))
	if err := r.admin.List(ctx, machines, client.InNamespace(r.ns), client.MatchingLabels{capi.ClusterNameLabel: name}); err != nil {
		return nil, err
	}
	for i := range machines.Items {
		b.items = append(b.items, &machines.Items[i])
	}
	cluster := r.clusterObject(name)
	if err := r.admin.Get(ctx, client.ObjectKeyFromObject(cluster), cluster); err != nil {
		return nil, err
	}
	b.items = append(b.items, cluster)
	return b, nil
}

// strip prepares a backed-up object for re-creation.
func strip(u *unstructured.Unstructured, mode string) *unstructured.Unstructured {
	out := u.DeepCopy()
	out.SetUID("")
	out.SetResourceVersion("")
	out.SetGeneration(0)
	out.SetCreationTimestamp(metav1.Time{})
	out.SetDeletionTimestamp(nil)
	out.SetDeletionGracePeriodSeconds(nil)
	out.SetManagedFields(nil)
	if mode == ModeVelero {
		out.SetOwnerReferences(nil)
	}
	delete(out.Object, "status")
	return out
}

func toUnstructured(obj client.Object) (*unstructured.Unstructured, error) {
	m, err := runtime.DefaultUnstructuredConverter.ToUnstructured(obj)
	if err != nil {
		return nil, err
	}
	u := &unstructured.Unstructured{Object: m}
	if _, ok := obj.(*corev1.ConfigMap); ok {
		u.SetAPIVersion("v1")
		u.SetKind("ConfigMap")
	}
	return u, nil
}
