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
// # The grant record
//
// The ConfigMap alone cannot keep the lock safe: a restore that keeps a stale
// owner UID lets the garbage collector delete it within milliseconds, and an
// operator may delete it by hand. So every acquisition is also recorded on
// the holder Machine, in the annotation GrantAnnotation
// ("initlock.dev/init-lock-grant"), which backup, restore and move carry with
// the Machine and which goes away with it. The protocol:
//
//  1. Lock reads the lock ConfigMap live. A caller that carries no grant
//     lists the cluster's grants along with it, in parallel; that list may
//     come from the API server's watch cache, as it only keeps the caller
//     from writing the lock over a grant that has stood for a while. If the lock is
//     missing while another Machine's grant stands, Lock creates it again
//     for that Machine (the earliest grant wins), records nothing for the
//     caller and refuses it (Result.Recreated). If the lock is held by
//     another Machine that exists (known from its grant, or checked live),
//     the caller is refused. If that Machine no longer exists, the lock is
//     taken over with an update conditional on the resourceVersion read. If
//     it is free, it is created (an atomic Create: of any number of racing
//     callers exactly one succeeds).
//  2. Having written the ConfigMap, Lock records the grant on the caller,
//     conditional on the caller's UID, and then lists the grants again, at
//     least as recent as its grant write (resourceVersionMatch
//     NotOlderThan); a caller that held its grant already lists them with a
//     consistent read. If another Machine's grant stands in the way, the lock is
//     handed to the earliest, the caller's grant is withdrawn and the
//     caller is refused.
//  3. Only then does Lock report the lock acquired. A call that fails after
//     recording a grant withdraws it before it returns.
//  4. Unlock withdraws the grant, then deletes the ConfigMap with the UID and
//     resourceVersion it read as preconditions.
//
// A grant recorded during the call gives way to any other grant. A grant the
// caller already held when the call began (a holder calling Lock again,
// after its lock was lost or restored) gives way only to an earlier one: its
// init may be running, and a later grant is a competitor's, which gives way
// to it in step 2, or one a failed call left behind. Grant times are
// recorded to the microsecond.
//
// Because a caller reports success only after its grant is durable and no
// other grant stood in its way, two callers can never both succeed while
// both grants stand: the later one sees the earlier one's grant. This holds
// whatever happens to the ConfigMap. And because a caller without a grant
// never writes the lock for itself while another grant stands, a lock that
// names a Machine carrying a grant is a confirmed acquisition: the holder's
// next Lock trusts it with a single read.
//
// Requests per path (reads are live GETs and LISTs, "∥" two reads made in
// parallel; writes are creates, patches and deletes), as the tests assert
// them:
//
//	path                                      reads        writes
//	healthy re-Lock by the holder             1            0
//	free Lock                                 GET∥LIST +1  2  (lock, grant)
//	re-adoption after a restore               2            1
//	upstream lock healed on its holder's Lock GET∥LIST +1  2  (lock, grant)
//	held by another Machine with a grant      GET∥LIST     0
//	take-over from a Machine that is gone     GET∥LIST +2  2
//	lock lost, caller refused                 GET∥LIST     1  (lock recreated for the holder)
//	Unlock                                    1            2  (withdraw grant, delete)
//
// # What it does not guarantee
//
//   - A grant counts only while the holder Machine exists and the Cluster is
//     not initialised. Deleting the holder Machine, or an explicit Unlock,
//     ends it; that is how a provider lets another Machine try after a failed
//     init.
//   - Safety rests on the Machine objects: restoring Machines from a backup
//     older than a grant, or editing the annotation away by hand, removes the
//     protection, as deleting the ConfigMap did upstream.
//   - Bootstrap providers that do not use this package (the upstream lock)
//     write no grants; their locks are protected only by the ConfigMap.
//   - While a Cluster is paused Lock changes nothing and returns
//     ErrClusterPaused: objects arrive in any order during restore and move,
//     and a decision taken then could be wrong.
//   - Two callers that both see each other's fresh grant both withdraw and
//     both retry: the protocol favours safety over progress in that race.
//   - Lock calls for one Machine must not run concurrently with each other
//     (controller-runtime never reconciles one object twice at once): a call
//     that finds the grant another call of the same Machine is still
//     confirming would take it as already held.
//   - Held grants are ordered by the times their callers recorded. A grant
//     left behind by a call whose write and withdrawal both failed after
//     reaching the server, and whose time is earlier than a grant confirmed
//     meanwhile (its caller's clock behind, or its write delayed after the
//     time was taken), could win over that grant if the lock is lost again.
//     Keep the clocks of the bootstrap provider's replicas synchronised.
//
// # Decide, then do
//
// Decide is the single decision function. It takes an Observation (the lock,
// the Cluster, the holder Machine, the grant records and, for Lock, the
// calling Machine), a Policy and the time, and returns a Verdict and an
// Action. Locker uses it for callers; the manager and the kubectl plugin use
// it, with Apply, to keep locks owned, release them after init and collect
// orphans.
package initlock
