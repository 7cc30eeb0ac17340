package locking

import (
	"context"
	"errors"

	"github.com/go-logr/logr"
	"k8s.io/klog/v2"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/initlock/initlock/pkg/initlock"
)

// ControlPlaneInitMutex is the control-plane init lock with the methods of
// the kubeadm bootstrap provider's locking.ControlPlaneInitMutex, carried
// out by an initlock.Locker. C and M are the provider's Cluster and Machine
// types, e.g. *clusterv1.Cluster and *clusterv1.Machine, so that the mutex
// satisfies the provider's own interface (CABPK's InitLocker). It is safe
// for concurrent use; concurrent calls must not share one Cluster object.
type ControlPlaneInitMutex[C, M client.Object] struct {
	locker *initlock.Locker
}

// NewControlPlaneInitMutex returns the mutex, writing through c. The types
// are named at the call, since nothing in the arguments names them:
//
//	locking.NewControlPlaneInitMutex[*clusterv1.Cluster, *clusterv1.Machine](mgr.GetClient(),
//		initlock.WithAPIReader(mgr.GetAPIReader()))
//
// c's scheme must know C and M when they are typed. Pass
// initlock.WithAPIReader whenever c reads from a cache (a manager's client
// does): the lock must be decided on live reads. Other initlock options
// (WithEventRecorder, WithClock) are passed on as they are.
func NewControlPlaneInitMutex[C, M client.Object](c client.Client, opts ...initlock.Option) *ControlPlaneInitMutex[C, M] {
	return &ControlPlaneInitMutex[C, M]{locker: initlock.New(c, opts...)}
}

// Lock tells whether machine holds cluster's init lock, taking it when it
// is free, re-adopting it after a restore and taking it over from a
// Machine that no longer exists (initlock.Locker.Lock). It is false when
// another Machine holds the lock and on every error; the error is logged,
// not returned (see the package documentation for those a provider should
// look at). When Lock writes the Cluster's grant register, cluster carries
// the annotation and resourceVersion the API server returned, so that the
// caller's next update of the same object succeeds.
func (m *ControlPlaneInitMutex[C, M]) Lock(ctx context.Context, cluster C, machine M) bool {
	log := logger(ctx, cluster)
	res, err := m.locker.Lock(ctx, cluster, machine)
	switch {
	case errors.Is(err, initlock.ErrClusterPaused):
		log.V(4).Info("Cluster is paused, not taking the init lock")
		return false
	case err != nil:
		log.Error(err, "Failed to acquire the init lock", "machine", klog.KObj(machine))
		return false
	case !res.Acquired:
		log.Info("Waiting for the machine holding the init lock to initialize", "holder", klog.KRef(cluster.GetNamespace(), res.Holder))
		return false
	}
	log.V(4).Info("Init lock acquired", "machine", klog.KObj(machine), "action", res.Action)
	return true
}

// Unlock releases cluster's init lock whoever holds it, as the provider's
// join path and its failed-init path mean it (initlock.AnyHolder). It is
// true when the lock is released or was already gone, and false on every
// error, logged: in particular it never deletes a ConfigMap of the lock's
// name that is not an init lock (initlock.ErrNotALock), releases nothing
// with a Cluster object that is not the live Cluster (one read before a
// restore or a move: initlock.ErrStaleCluster), writes nothing to a
// Cluster it reads paused, and releases only the lock and grant it found:
// trying again after a race or an answer lost, it leaves those another
// Machine was given meanwhile. What it found is read in two requests, the
// lock, then the Cluster: a grant made between the two counts as found. So
// a Machine that may not hold the lock must not call it while kubeadm init
// may run elsewhere.
func (m *ControlPlaneInitMutex[C, M]) Unlock(ctx context.Context, cluster C) bool {
	log := logger(ctx, cluster)
	err := m.locker.Unlock(ctx, cluster, nil, initlock.AnyHolder())
	switch {
	case err == nil:
		return true
	case errors.Is(err, initlock.ErrClusterPaused):
		log.V(4).Info("Cluster is paused, not releasing the init lock")
	case errors.Is(err, initlock.ErrNotALock):
		log.Error(err, "Refusing to release a ConfigMap that is not an init lock")
	case errors.Is(err, initlock.ErrStaleCluster):
		log.Error(err, "Refusing to release the init lock with a Cluster object of another incarnation")
	default:
		log.Error(err, "Failed to release the init lock")
	}
	return false
}

// Adopt re-adopts cluster's existing init lock without taking it
// (initlock.Locker.Adopt): it never creates, grants or releases a lock, so
// a provider calls it where it must not take one, such as the branch that
// restores a bootstrap config's status after a restore or a move. It is
// false when the lock could not be read or written, or the Cluster is
// paused (logged): the caller tries again. A ConfigMap that is not a lock,
// or a lock that cannot be read, is a person's to resolve: logged, and
// true, as a missing lock and a lock the Cluster owns already are.
func (m *ControlPlaneInitMutex[C, M]) Adopt(ctx context.Context, cluster C) bool {
	log := logger(ctx, cluster)
	adopted, err := m.locker.Adopt(ctx, cluster)
	switch {
	case errors.Is(err, initlock.ErrClusterPaused):
		log.V(4).Info("Cluster is paused, not adopting the init lock")
		return false
	case errors.Is(err, initlock.ErrNotALock), errors.Is(err, initlock.ErrCorruptLock):
		log.Error(err, "Leaving the init lock as it is")
		return true
	case err != nil:
		log.Error(err, "Failed to adopt the init lock")
		return false
	case adopted:
		log.Info("Init lock adopted by its Cluster")
	}
	return true
}

// logger is the caller's logger with the lock's ConfigMap, as the upstream
// mutex logs it.
func logger(ctx context.Context, cluster client.Object) logr.Logger {
	name, err := initlock.LockName(cluster.GetName())
	if err != nil {
		name = cluster.GetName() + "-lock" // too long for a lock: logged as upstream names it
	}
	return ctrl.LoggerFrom(ctx, "configMap", klog.KRef(cluster.GetNamespace(), name))
}
