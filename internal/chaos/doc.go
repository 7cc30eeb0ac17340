// Package chaos proves initlock under load and faults: it runs randomised
// scenarios on a real control plane (kube-apiserver, etcd and the garbage
// collector, from internal/kubeenv) and checks four invariants while they
// run and once they have settled.
//
// # A scenario
//
// Generate turns a seed into a Plan; Run carries it out in a fresh
// namespace:
//
//   - Clusters with one to three control-plane Machines, some starting with
//     a lock written by an upstream provider, some already initialised with
//     that lock still held, some whose lock name is taken by a ConfigMap that
//     is not a lock.
//   - Two or three initlock-manager replicas, processes of the real binary,
//     the first always without leader election, the others with or
//     without it. They talk to the API server through a local Proxy, which
//     injects faults into their requests and attributes their deletions;
//     no hook in the manager is needed.
//   - Simulated bootstrap controllers call Locker.Lock for random Machines,
//     through an Injector wrapped around their rest.Config (conflicts,
//     5xx, timeouts, responses lost after the write happened, latency).
//     Calls for one Machine are serialised, as a work queue serialises
//     reconciles of one object. A Machine that acquires the lock "runs
//     kubeadm init": after a while its Cluster is initialised, or the init
//     fails and it calls Unlock.
//   - A driver follows the plan's actions: SIGKILL of a replica (restarted
//     later, as is a replica that exits by itself), an operator deleting a
//     lock, a lock's owner UID made stale (the garbage collector deletes
//     it), pause and unpause, a Machine deleted and re-created under its
//     name, a Cluster decommissioned, and backup-disaster-restore of a
//     Cluster, its Machines and its lock, Velero-style (no UIDs, no
//     ownerReferences, no status) or as a naive copy (old owner UIDs kept),
//     in Velero's order (ConfigMaps, Machines, Clusters), the reverse order
//     or a random one, sometimes paused, sometimes with the Cluster deleted
//     for good mid-restore.
//   - Then faults stop, every Cluster is unpaused and every replica runs;
//     the runner waits for the locks to settle.
//
// # The invariants
//
//  1. Grants never overlap (InvNoOverlap): a Machine holds a cluster's lock
//     from the moment Lock returns Acquired until it calls Unlock, it is
//     deleted, or its init completes; no other Machine may be told Acquired
//     in between. Checked at every Lock result. A lock an upstream
//     provider wrote holds for its Machine too, until an operator or the
//     garbage collector deletes it: without a grant nothing else
//     protects it, a limit pkg/initlock documents.
//  2. Settled (InvSettled): once settled, no lock is left whose Cluster is
//     gone, and none whose Cluster is initialised.
//  3. Foreign ConfigMaps untouched (InvForeignUntouched): no planted
//     ConfigMap that is not a lock is modified or deleted; checked on every
//     watch event and by checksum, UID and resourceVersion at the end.
//  4. No unsafe deletion (InvNoUnsafeDelete): no lock is deleted by a
//     manager replica while its holder Machine exists and its Cluster
//     exists, is not being deleted and was never initialised, and no lock
//     is deleted by a bootstrap controller other than through Unlock.
//     The Watcher records every write to ConfigMaps, Machines and
//     Clusters (grant registers included) with its revision; deletions are judged on the
//     state at their revision, once all three watches have gone past it,
//     and attributed by the UID precondition of the DELETE that made them.
//
// A violation, or a failure of the runner itself, is reported with the
// seed and the History of the scenario: every action, API result, manager
// deletion and watch event, in order, with times and resourceVersions.
//
// # What it does not guarantee
//
//   - Replaying a seed replays the plan (the same clusters, actions, fault
//     rates and random draws), not the interleaving of goroutines,
//     processes and the API server: a rare race may need several runs of
//     its seed, or a long run, to show again.
//   - Invariant 1 is checked against what Lock returned to the simulated
//     controllers, not against the storage alone: a lock briefly written
//     for a refused caller (the grant protocol's hand-back) is not a grant.
//   - A cluster's initialisation is a fact of the scenario: a restored
//     Cluster whose status the restore dropped is still initialised for
//     invariant 4.
//   - Resource versions are compared as numbers, which the API server's
//     etcd storage guarantees and the API does not promise.
package chaos
