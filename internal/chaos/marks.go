package chaos

import (
	"context"
	"slices"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/initlock/initlock/internal/kubeenv"
	"github.com/initlock/initlock/internal/kubeenv/faults"
	"github.com/initlock/initlock/internal/kubeenv/wire"
)

// leaveMark leaves on a lock owned by its live Cluster and naming an
// existing Machine a mark that lets its delete through, as a release
// stopped between its mark and its delete (the Machine it names came back
// since) or a clusterctl move that failed after marking it (move) leaves
// it, and waits until the manager has taken it off, the settle timeout at
// most. The Cluster is the driver's meanwhile: no action of the driver
// deletes the lock in that window, which docs/design.md states.
func (r *runner) leaveMark(ctx context.Context, name string, move bool) error {
	cm, err := r.lockOf(ctx, name)
	if cm == nil || err != nil {
		return err
	}
	cl := r.clusterObject(name)
	if err := r.admin.Get(ctx, client.ObjectKeyFromObject(cl), cl); err != nil {
		return client.IgnoreNotFound(err)
	}
	holder := wire.LockOf(cm, name).Record.MachineName
	m := r.machineObject(holder)
	err = r.admin.Get(ctx, client.ObjectKeyFromObject(m), m)
	if apierrors.IsNotFound(err) || !ownedBy(cm.OwnerReferences, cl) {
		r.hit(faults.MarkLeft, "lock not held for a Machine, or not owned by its live Cluster: no mark")
		return nil
	} else if err != nil {
		return err
	}
	key, value := wire.ReleaseAnnotation, string(cm.UID)
	if move {
		key, value = wire.MoveAnnotation, ""
	}
	next := cm.DeepCopy()
	if next.Annotations == nil {
		next.Annotations = map[string]string{}
	}
	next.Annotations[key] = value
	switch err := r.admin.Patch(ctx, next, client.MergeFromWithOptions(cm, client.MergeFromWithOptimisticLock{})); {
	case apierrors.IsConflict(err) || apierrors.IsNotFound(err):
		r.hit(faults.MarkLeft, "lock changed meanwhile: no mark")
		return nil
	case err != nil:
		return err
	}
	r.hit(faults.MarkLeft, key)
	r.h.Add("driver", "mark left", cm.Name, next.ResourceVersion, key+" on the lock held for "+holder)
	left := time.Now()
	for time.Since(left) < r.o.SettleTimeout {
		now, err := kubeenv.GetLock(ctx, r.admin, r.ns, name)
		if err != nil {
			return err
		}
		if now == nil || now.UID != cm.UID {
			return nil
		}
		if _, marked := now.Annotations[key]; !marked {
			return nil
		}
		if !sleep(ctx, 50*time.Millisecond) {
			return ctx.Err()
		}
	}
	r.c.Violate(InvSettled, "lock %s kept the mark %s left on it %s after it was left", cm.Name, key, r.o.SettleTimeout)
	return nil
}

// ownedBy tells whether refs point at Cluster cl by its UID.
func ownedBy(refs []metav1.OwnerReference, cl *unstructured.Unstructured) bool {
	return slices.ContainsFunc(refs, func(ref metav1.OwnerReference) bool {
		return ref.Kind == "Cluster" && ref.Name == cl.GetName() && ref.UID == cl.GetUID()
	})
}
