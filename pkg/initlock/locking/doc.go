// Package locking is a drop-in replacement for the control-plane init mutex
// of the kubeadm bootstrap provider (CABPK's
// bootstrap/kubeadm/pkg/locking) and of the providers that copied it: the
// same package name, constructor and methods, carried out by
// initlock.Locker. A provider swaps the lock by changing the import and the
// constructor line:
//
//	import "github.com/initlock/initlock/pkg/initlock/locking"
//
//	r.KubeadmInitLock = locking.NewControlPlaneInitMutex[*clusterv1.Cluster, *clusterv1.Machine](mgr.GetClient(),
//		initlock.WithAPIReader(mgr.GetAPIReader()))
//
// The type arguments make Lock, Unlock and Adopt take the provider's own Cluster
// and Machine types, so the mutex satisfies the provider's interface
// unchanged; this package does not import Cluster API. Typed objects are
// read through the client's scheme (converted to unstructured content),
// unstructured ones as they are.
//
// # What each call maps to
//
//   - Lock(ctx, cluster, machine) bool is initlock.Locker.Lock. true when
//     Result.Acquired: the lock was free, or machine holds it (re-adopted
//     after a restore when needed), or its holder no longer exists and it
//     was taken over in place. Upstream deletes the lock of a missing
//     holder and answers false, to try again 30 s later.
//   - Unlock(ctx, cluster) bool is initlock.Locker.Unlock with AnyHolder:
//     the lock is released whoever holds it, which is what the provider
//     means on its join path (the control plane is initialised) and after a
//     failed init (its own lock). Unlike upstream it deletes the lock only
//     with UID and resourceVersion preconditions, empties the grant register
//     on the Cluster, and never deletes a ConfigMap of the lock's name that
//     is not an init lock. A missing lock is true, as upstream.
//   - Adopt(ctx, cluster) bool is initlock.Locker.Adopt, which upstream
//     lacks: it re-adopts an existing lock that lost its Cluster
//     ownerReference (held by an existing Machine, or any lock once the
//     control plane is initialised), taking off in the same patch the marks
//     a keeper's adoption takes off, and writes nothing else (no lock
//     created, granted or released). A provider calls it where it must not
//     take the lock: the branch that restores a bootstrap config's status
//     after a restore or a move. false means "try again" (an API error, a
//     paused Cluster); a ConfigMap that is not a lock is logged and true.
//     A provider finds it with a type assertion on its own small
//     interface, so its InitLocker interface stays as it is.
//   - Logging goes to ctrl.LoggerFrom(ctx) with the key configMap, as the
//     upstream mutex logs: Info while another Machine holds the lock, Error
//     for every error, V(4) for success and for a paused Cluster. Events on
//     the Cluster come from the Locker when the provider passes
//     initlock.WithEventRecorder (LockAcquired, LockTakenOver, LockAdopted,
//     LockRecreated, LockReleased).
//   - After a call that wrote the grant register, the caller's Cluster
//     object carries the register and the resourceVersion the API server
//     returned, if the object was the Cluster as it stood before the write;
//     otherwise it is untouched. Either way the provider's next update of
//     the same object is not refused for the lock's write.
//
// # What the bool hides
//
// false from Lock means "not now" to the provider, which requeues. These
// errors behind it need a person or a fix, and are only logged:
//
//   - permission denied: the provider needs the RBAC below, in particular
//     get and patch on clusters.cluster.x-k8s.io for the grant register;
//     without it Lock fails on every call and no Machine runs init;
//   - initlock.ErrCorruptLock (the lock or the register cannot be read) and
//     initlock.ErrNotALock (a ConfigMap of the lock's name that is not a
//     lock): init waits until an operator repairs it ('kubectl initlock
//     list' names it);
//   - initlock.ErrStaleMachine: the Machine object passed is not the live
//     one; the next reconcile passes the live object;
//   - initlock.ErrContended and API errors: transient, the next call
//     retries.
//
// false from Unlock on the failed-init path makes the provider report an
// error, as upstream; on the join path it is ignored, and a lock that is
// not released there is released by initlock-manager once the control
// plane is initialised. A provider that wants the errors themselves calls
// initlock.Locker directly.
//
// # Unit tests
//
// A provider's tests that run its reconciler on controller-runtime's fake
// client pass the real mutex a client built with package initlocktest
// (initlocktest.NewClientBuilder in place of fake.NewClientBuilder), which
// gives objects UIDs and answers the lock's compare-and-swap as the API
// server does.
//
// # Permissions
//
// The markers a provider adds (the verbs are those the Locker uses; events
// only with WithEventRecorder):
//
//	// +kubebuilder:rbac:groups=cluster.x-k8s.io,resources=clusters,verbs=get;patch
//	// +kubebuilder:rbac:groups=cluster.x-k8s.io,resources=machines,verbs=get
//	// +kubebuilder:rbac:groups="",resources=configmaps,verbs=get;create;patch;delete
//	// +kubebuilder:rbac:groups=events.k8s.io,resources=events,verbs=create;patch
//
// # Limits
//
// Everything initlock.Locker guarantees and does not guarantee holds here
// (see package initlock). In addition: the mutex cannot tell an error from
// "held by another" to its caller, and Unlock cannot say which Machine it
// releases for, so it must not be called by a Machine that may not hold
// the lock while init may be running.
package locking
