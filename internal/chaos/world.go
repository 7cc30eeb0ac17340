package chaos

import (
	"context"
	"fmt"
	"time"

	"github.com/google/uuid"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/initlock/initlock/internal/kubeenv"
	"github.com/initlock/initlock/internal/kubeenv/wire"
	"github.com/initlock/initlock/pkg/initlock/capi"
)

func (r *runner) clusterObject(name string) *unstructured.Unstructured {
	u := &unstructured.Unstructured{}
	u.SetGroupVersionKind(capi.ClusterGVK(capi.V1Beta2))
	u.SetNamespace(r.ns)
	u.SetName(name)
	return u
}

func (r *runner) machineObject(name string) *unstructured.Unstructured {
	u := &unstructured.Unstructured{}
	u.SetGroupVersionKind(capi.MachineGVK(capi.V1Beta2))
	u.SetNamespace(r.ns)
	u.SetName(name)
	return u
}

// deleteCluster deletes a Cluster and its Machines, as Cluster API does,
// and waits until they are gone.
func (r *runner) deleteCluster(ctx context.Context, name string) error {
	crt := r.cluster(name)
	for _, m := range crt.plan.Machines {
		r.c.MachineDeleting("driver", name, m)
	}
	r.c.ClusterDeleting(name)
	if err := r.admin.Delete(ctx, r.clusterObject(name)); err != nil && !apierrors.IsNotFound(err) {
		return err
	}
	r.h.Add("driver", "cluster deleted", name, "", "")
	if err := r.deleteMachines(ctx, name, crt.plan.Machines); err != nil {
		return err
	}
	return r.waitClusterGone(ctx, name)
}

// waitClusterGone waits until a deleted Cluster is gone, removing its
// finalizers.
func (r *runner) waitClusterGone(ctx context.Context, name string) error {
	return r.waitGone(ctx, r.clusterObject(name), func(u *unstructured.Unstructured) error {
		if len(u.GetFinalizers()) == 0 {
			return nil
		}
		patch := []byte(`{"metadata":{"finalizers":null}}`)
		return r.admin.Patch(ctx, u, client.RawPatch(types.MergePatchType, patch))
	})
}

// deleteMachines deletes Machines of a Cluster and waits until they are
// gone; their holds end.
func (r *runner) deleteMachines(ctx context.Context, cluster string, names []string) error {
	for _, m := range names {
		r.c.MachineDeleting("driver", cluster, m)
		if err := r.admin.Delete(ctx, r.machineObject(m)); err != nil && !apierrors.IsNotFound(err) {
			return err
		}
		r.h.Add("driver", "machine deleted", m, "", "")
	}
	for _, m := range names {
		if err := r.waitGone(ctx, r.machineObject(m), nil); err != nil {
			return err
		}
		r.c.MachineGone(cluster, m)
	}
	return nil
}

// waitGone polls until obj is gone, calling nudge on it while it exists.
func (r *runner) waitGone(ctx context.Context, obj *unstructured.Unstructured, nudge func(*unstructured.Unstructured) error) error {
	deadline := time.Now().Add(30 * time.Second)
	for {
		u := obj.DeepCopy()
		err := r.admin.Get(ctx, client.ObjectKeyFromObject(obj), u)
		if apierrors.IsNotFound(err) {
			return nil
		}
		if err == nil && nudge != nil {
			if err := nudge(u); err != nil && !apierrors.IsNotFound(err) && !apierrors.IsConflict(err) {
				return err
			}
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%s %s still exists after 30s (last error: %w)", obj.GetKind(), obj.GetName(), err)
		}
		if !sleep(ctx, 20*time.Millisecond) {
			return ctx.Err()
		}
	}
}

func (r *runner) cluster(name string) *clusterRT {
	for _, c := range r.clusters {
		if c.plan.Name == name {
			return c
		}
	}
	panic("no cluster " + name)
}

// lockOf reads Cluster name's lock live; nil when there is none, or when
// the ConfigMap of its name is not a lock.
func (r *runner) lockOf(ctx context.Context, name string) (*corev1.ConfigMap, error) {
	cm, err := kubeenv.GetLock(ctx, r.admin, r.ns, name)
	if cm == nil || err != nil || wire.LockOf(cm, name).Err != nil {
		return nil, err
	}
	return cm, nil
}

// deleteLock deletes a Cluster's lock, if it is one, as someone outside
// initlock would.
func (r *runner) deleteLock(ctx context.Context, name, why string) error {
	cm, err := r.lockOf(ctx, name)
	if cm == nil || err != nil {
		return err
	}
	err = r.admin.Delete(ctx, cm, client.Preconditions{UID: &cm.UID})
	switch {
	case apierrors.IsForbidden(err):
		r.h.Add("driver", "lock delete refused", cm.Name, cm.ResourceVersion, why+": the lock guard refused it")
		return nil
	case err != nil && !apierrors.IsNotFound(err) && !apierrors.IsConflict(err):
		return err
	}
	r.h.Add("driver", "lock deleted", cm.Name, cm.ResourceVersion, why)
	return nil
}

// releaseLock deletes a lock as a release does, past the lock guard (its
// release mark, then the delete): a disaster that takes the lock with its
// Cluster, as a namespace deletion does.
func (r *runner) releaseLock(ctx context.Context, name, why string) error {
	cm, err := r.lockOf(ctx, name)
	if cm == nil || err != nil {
		return err
	}
	if err := kubeenv.ReleaseLock(ctx, r.admin, cm); err != nil && !apierrors.IsConflict(err) {
		return err
	}
	r.h.Add("driver", "lock released", cm.Name, cm.ResourceVersion, why)
	return nil
}

// holdFinalizer is the finalizer of a controller other than initlock's.
const holdFinalizer = "chaos.initlock.dev/hold"

// holdDeletion puts holdFinalizer on a lock for d, then removes it: a
// release that deletes the lock meanwhile leaves it being deleted, held
// back, until then.
func (r *runner) holdDeletion(ctx context.Context, name string, d time.Duration) error {
	cm, err := r.lockOf(ctx, name)
	if cm == nil || err != nil {
		return err
	}
	add := fmt.Appendf(nil, `[{"op":"test","path":"/metadata/uid","value":%q},{"op":"add","path":"/metadata/finalizers","value":[%q]}]`, cm.UID, holdFinalizer)
	if err := r.admin.Patch(ctx, cm, client.RawPatch(types.JSONPatchType, add)); err != nil {
		if apierrors.IsNotFound(err) || apierrors.IsInvalid(err) {
			return nil // gone, or taken by another finalizer meanwhile
		}
		return err
	}
	r.h.Add("driver", "lock deletion held", cm.Name, cm.ResourceVersion, "another controller's finalizer for "+d.String())
	sleep(ctx, d)
	drop := fmt.Appendf(nil, `[{"op":"test","path":"/metadata/uid","value":%q},{"op":"test","path":"/metadata/finalizers","value":[%q]},{"op":"remove","path":"/metadata/finalizers"}]`, cm.UID, holdFinalizer)
	err = r.admin.Patch(context.WithoutCancel(ctx), cm, client.RawPatch(types.JSONPatchType, drop))
	if err != nil && !apierrors.IsNotFound(err) && !apierrors.IsInvalid(err) {
		return err
	}
	r.h.Add("driver", "lock deletion let go", cm.Name, "", "the finalizer removed")
	return nil
}

// staleOwner points the lock's ownerReference at a Cluster UID that does not
// exist.
func (r *runner) staleOwner(ctx context.Context, name string) error {
	cm, err := r.lockOf(ctx, name)
	if cm == nil || err != nil {
		return err
	}
	next := cm.DeepCopy()
	next.OwnerReferences = []metav1.OwnerReference{{APIVersion: capi.Group + "/" + capi.V1Beta2, Kind: "Cluster",
		Name: name, UID: types.UID(uuid.NewString())}}
	err = r.admin.Patch(ctx, next, client.MergeFromWithOptions(cm, client.MergeFromWithOptimisticLock{}))
	if apierrors.IsNotFound(err) || apierrors.IsConflict(err) {
		return nil
	}
	if err == nil {
		r.h.Add("driver", "lock owner made stale", cm.Name, next.ResourceVersion, "a naive copy: the garbage collector will delete it")
	}
	return err
}

func (r *runner) setPaused(ctx context.Context, name string, paused bool) error {
	patch := fmt.Appendf(nil, `{"spec":{"paused":%t}}`, paused)
	err := r.admin.Patch(ctx, r.clusterObject(name), client.RawPatch(types.MergePatchType, patch))
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err == nil {
		r.h.Add("driver", map[bool]string{true: "cluster paused", false: "cluster unpaused"}[paused], name, "", "")
	}
	return err
}

// setStatusInitialized writes what Cluster API writes once the control
// plane is initialised.
func (r *runner) setStatusInitialized(ctx context.Context, name string) error {
	err := kubeenv.SetInitialized(ctx, r.admin, r.clusterObject(name))
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err == nil {
		r.h.Add("driver", "status initialised", name, "", "")
	}
	return err
}

// replaceMachine deletes a Machine and, after a while, creates one with the
// same name and a new UID.
func (r *runner) replaceMachine(ctx context.Context, cluster, machine string, after time.Duration) error {
	if err := r.deleteMachines(ctx, cluster, []string{machine}); err != nil {
		return err
	}
	sleep(ctx, after)
	if err := r.createMachine(ctx, cluster, machine); err != nil {
		return err
	}
	r.h.Add("driver", "machine created", machine, "", "a new machine with the old name")
	return nil
}
