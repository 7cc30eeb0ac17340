// Package initlock is a restore-safe control-plane init lock for Cluster API
// bootstrap providers: the mutex that makes sure only one Machine of a
// cluster runs "kubeadm init". It is wire-compatible with the lock of the
// kubeadm bootstrap provider (CABPK v1.2 to v1.14) and of the RKE2, k3s and
// MicroK8s providers, so that their locks are read and healed, and locks
// written here are read correctly by them.
//
// # The wire contract
//
//   - The lock is a ConfigMap named "<cluster-name>-lock" in the Cluster's
//     namespace (LockName).
//   - It carries the label "cluster.x-k8s.io/cluster-name: <cluster-name>"
//     (ClusterNameLabel).
//   - Its data key "lock-information" (DataKey) holds the JSON Record
//     {"machineName":"<machine>"}. initlock adds "machineUID" and
//     "acquiredAt"; upstream decoders ignore unknown fields, and initlock
//     ignores fields it does not know.
//   - It has one ownerReference to the Cluster: apiVersion
//     "cluster.x-k8s.io/<version>", kind "Cluster", name and uid, with neither
//     controller nor blockOwnerDeletion set. Other ownerReferences a user or
//     tool added are kept.
//
// A ConfigMap with the lock's name but without the label (for this cluster)
// or the data key is not a lock (ErrNotALock) and is never modified or
// deleted. A lock whose record is not JSON or names no machine is corrupt
// (ErrCorruptLock) and is never taken over silently.
//
// # The grant register
//
// The ConfigMap alone cannot keep the lock safe: a restore that keeps a stale
// owner UID lets the garbage collector delete it within milliseconds, and an
// operator may delete it by hand. So every acquisition is also recorded in
// the Cluster, in the annotation GrantAnnotation
// ("initlock.dev/init-lock-grant"): the grant register. It names the
// Machine that was granted the lock. Backup, restore and move carry it with
// the Cluster, and every write to it is a compare-and-swap: a JSON patch
// that tests the value read and fails (422, nothing written) if the
// register changed. So at most one Machine is ever named in it, whatever
// happens to the ConfigMap. A grant counts while the Machine it names
// exists and the control plane is not initialised. The Machine is matched
// by name and, while the Cluster keeps the UID the grant recorded, by UID
// too; a restore or a move gives the Cluster and its Machines new UIDs, and
// the grant then names its Machine by name. The protocol:
//
//  1. A caller that sees the register empty, in the Cluster object it
//     passes, creates the lock and claims the register at once, in
//     parallel. When both succeed the lock is acquired: Create is atomic,
//     and the claim succeeds only while no grant is recorded. This is the
//     free path: one round of two writes.
//  2. A caller that sees its own grant in the register (the holder calling
//     Lock again) reads the lock live; a lock that names it, and that it
//     wrote itself, is its own: one read.
//  3. Every other case, and any of the above that did not settle it, reads
//     the lock and the Cluster live, in parallel, and then the Machines they
//     name, and decides:
//     - The register names another existing Machine: that Machine holds
//     the lock. A missing lock is created again for it, and a lock naming
//     anyone else is handed to it; both are marked as handed over by the
//     caller, which is refused (Result.Recreated when the lock was lost).
//     - The register names the caller: the caller holds the lock; it
//     creates, takes over or re-adopts the lock as needed.
//     - The register is empty, or names a Machine that is gone: the caller
//     claims it, with a compare-and-swap against the value it read, and
//     then writes the lock for itself. A lock held by another existing
//     Machine that no register arbitrates (one an upstream provider wrote)
//     is not taken: the caller is refused, and a grant it claimed in this
//     call is withdrawn before Lock returns.
//     A write that loses a race starts the step again.
//  4. Unlock empties the register if it names the holder, then deletes the
//     ConfigMap with the UID and resourceVersion it read as preconditions.
//
// Because a caller reports success only when the register names it (it
// claimed it, or read it live, or trusts its own view of it together with a
// lock it wrote itself), and the register names one Machine at a time, two
// callers cannot both hold the lock while the first's grant counts. A grant
// whose outcome is unknown (the answer to the claim was lost) is withdrawn
// like one that was written, should the call not acquire the lock.
//
// Requests per path (reads are live GETs, "∥" two requests made in
// parallel; writes are creates, patches and deletes, a failed one
// included), as the tests assert them:
//
//	path                                       reads          writes
//	free Lock                                  0              CREATE ∥ PATCH register
//	healthy re-Lock by the holder              1              0
//	re-adoption after a restore                1              1
//	held by another Machine with a grant       GET ∥ GET +1   0
//	lock lost, caller refused                  GET ∥ GET +1   1  (lock recreated for the holder)
//	holder's next Lock after that              1 + GET ∥ GET  1  (record made its own)
//	upstream lock healed on its holder's Lock  GET ∥ GET      CREATE ∥ PATCH register, then 1
//	take-over from a Machine that is gone      GET ∥ GET +1   CREATE ∥ PATCH register, then 1
//	held by an upstream lock, caller refused   GET ∥ GET +1   CREATE ∥ PATCH register, then 1 (withdraw)
//	Unlock                                     GET ∥ GET      2  (empty register, delete)
//
// # What it does not guarantee
//
//   - A grant counts only while a Machine of its name exists and the
//     Cluster is not initialised. Deleting the holder Machine, or an
//     explicit Unlock, ends it; that is how a provider lets another Machine
//     try after a failed init. A Machine created again under the holder's
//     name does not inherit the grant, unless the Cluster too was created
//     again (restored or moved) since the grant was recorded.
//   - Safety rests on the Cluster object: restoring a Cluster from a backup
//     older than a grant, or editing the annotation away by hand, removes
//     the protection, as deleting the ConfigMap did upstream. A register
//     that holds something else than a grant record refuses every caller
//     (ErrCorruptLock) until an operator releases it.
//   - The holder's single-read re-Lock trusts the Cluster object the caller
//     passes. A provider whose cache still shows its own grant after its
//     Unlock, while the lock names it again (a copy restored from an old
//     backup), is told it holds the lock. Lock marks a record it writes on
//     another Machine's behalf, and the holder confirms such a record live.
//   - Bootstrap providers that do not use this package (the upstream lock)
//     write no grants: their locks are protected only by the ConfigMap, and
//     a caller of this package never takes them while their holder exists.
//   - While a Cluster is paused Lock changes nothing and returns
//     ErrClusterPaused: objects arrive in any order during restore and move,
//     and a decision taken then could be wrong.
//   - A caller that loses the race for the register after creating the lock
//     hands the lock over to the winner: until then the lock names it, and
//     it is refused.
//   - Lock writes the grant into the Cluster object passed; concurrent calls
//     must not share one object. A provider needs permission to get and
//     patch Clusters.
//
// # Decide, then do
//
// Decide is the single decision function. It takes an Observation (the lock,
// the Cluster and its grant register, the holder Machine, the Machine the
// register names and, for Lock, the calling Machine), a Policy and the time, and returns a Verdict and an
// Action. Locker uses it for callers; the manager and the kubectl plugin use
// it, with Apply, to keep locks owned, release them after init and collect
// orphans.
//
// # Providers that hold CABPK's mutex
//
// Package locking (github.com/initlock/initlock/pkg/initlock/locking) has
// the constructor and bool methods of CABPK's ControlPlaneInitMutex over a
// Locker, so that such a provider swaps its lock with one line.
package initlock
