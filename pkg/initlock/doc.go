// Package initlock is a restore-safe control-plane init lock for Cluster API
// bootstrap providers, wire-compatible with the lock of the kubeadm
// bootstrap provider (CABPK v1.2 to v1.14) and its RKE2, k3s and MicroK8s
// copies: a ConfigMap "<cluster>-lock" (LockName) labelled
// cluster.x-k8s.io/cluster-name, whose lock-information holds
// {"machineName":"…"}, with one ownerReference to the Cluster. Make one
// Locker (New); call Lock before generating a control-plane Machine's init
// data, Unlock when init fails, and Unlock with AnyHolder once the control
// plane is initialised. Package locking wraps a Locker in CABPK's
// ControlPlaneInitMutex, bool methods and all. Package initlocktest makes
// controller-runtime's fake client answer a Locker as the API server does,
// for providers' unit tests.
//
// Guarantees. At most one Machine is granted the lock while it exists and
// the control plane is not initialised, whatever happens to the ConfigMap:
// each grant is also recorded on the Cluster (annotation
// initlock.dev/init-lock-grant), which backup, restore and clusterctl move
// carry. Objects passed may come from a lagging cache: Lock and Unlock read
// live what they rely on, or write with preconditions that cover it, and
// refuse objects from before a restore, move or re-creation
// (ErrStaleMachine, ErrStaleCluster). A holder's Lock re-adopts a restored
// lock; a lock whose holder is gone is taken over in place. A ConfigMap
// that is not a lock is never modified, and no call that begins its
// writes on a paused Cluster writes anything (a Lock whose claim was
// applied before the pause may still create the lock it claimed). A
// release with no grant to retire writes the lock alone, and its
// preconditions cannot test the Cluster: a pause landing between its
// reading and its writes does not stop it; nor does it stop an adoption
// (Lock's, Adopt's), whose patch binds the lock alone. Lock and
// Unlock never wait: a refused caller gets Result.RetryAfter.
//
// Limits. Losing both records at once (the ConfigMap deleted and the
// Cluster restored from a backup older than the grant) may let a second
// Machine in, as upstream after the ConfigMap alone is lost. An adoption
// (Lock's, Adopt's, a keeper's) that a delete and re-creation of the
// Cluster under its name overtakes, in the milliseconds between its live
// read of the Cluster and its patch, writes the deleted Cluster's UID:
// without the lock guard the garbage collector then deletes the lock,
// which is that loss when the new Cluster lacks the grant. A grant counts
// only while its Machine exists. Locks of providers that keep the upstream
// lock have no grant. The library's internal engine states the protocol
// and the bounds to which it is proved; docs/design.md gives the argument.
// Package keeper is what the initlock manager and kubectl initlock use to
// heal and release locks; providers do not need it. RBAC: get and
// patch Clusters, get Machines, get, create, patch and delete ConfigMaps.
package initlock
