// Package chaos proves initlock under load and faults: it runs randomised
// scenarios on a real control plane (kube-apiserver, etcd and the garbage
// collector, from internal/kubeenv) and checks five invariants while they
// run and once they have settled.
//
// # A scenario
//
// Generate turns a seed into a Plan; Run carries it out in a fresh
// namespace:
//
//   - Clusters with one to three control-plane Machines and an add-on
//     ConfigMap each (a user's object the Cluster owns), some starting with
//     a lock written by an upstream provider, some already initialised with
//     that lock still held, some whose lock name is taken by a ConfigMap that
//     is not a lock.
//   - Two or three initlock-manager replicas, processes of the real binary,
//     the first always without leader election, the others with or
//     without it. They talk to the API server through a local Proxy, which
//     injects faults into their requests and attributes their deletions;
//     no hook in the manager is needed.
//   - Simulated bootstrap controllers call Locker.Lock for random Machines,
//     through an Injector wrapped around their rest.Config. Calls for one
//     Machine are serialised, as a work queue serialises reconciles of one
//     object. A Machine that acquires the lock "runs kubeadm init": after
//     a while its Cluster is initialised, or the init fails and it calls
//     Unlock.
//   - A driver follows the plan's actions at their times, each injecting
//     a fault class of the catalogue (Action.Kind: manager-killed, pause,
//     backup-restore, ...). Restores go through internal/kubeenv/velerosim,
//     Velero-style (no UIDs, no ownerReferences, no status; initlock's
//     plugin records the owners, each restore under a name of its own) or
//     as a naive copy (old owner UIDs kept), in Velero's order (ConfigMaps,
//     Machines, Clusters), the reverse order or a random one, sometimes
//     paused, sometimes with the Cluster deleted for good mid-restore. A
//     partial restore (same-name-owner) lets an unrelated Cluster take the
//     lost one's name first. A replica killed is started again later, as
//     is one that exits by itself.
//   - Then faults stop, every Cluster is unpaused, every write held back
//     is sent and every replica runs; the runner waits for the locks to
//     settle.
//
// # Fault classes
//
// Every fault is of a class of the one catalogue, internal/kubeenv/faults,
// which names it as the explorer (internal/explore) does. classUses maps
// each class chaos models to what injects it: the Injector's request
// faults (requestFaults, drawn per request, for the bootstrap controllers
// and, through the Proxy, the managers; a late write keeps the operation
// it was made for), the driver's actions (driverClasses), and the plan's
// stale caller views (read from a controller-runtime informer cache whose
// watch events arrive Plan.CacheLag late), delayed manager watches and
// relinker watches (the requests with relink.UserAgent), cut-off
// Lock calls and inits. Each is drawn from the seed. Plan.Planned tells
// which classes a plan enables, Result.Faults and Totals count what was
// injected, by class, beside the details some classes add (late writes
// applied or refused, what a re-created Machine held, holds kept across a
// Cluster restored from an older copy).
//
// TestFaultCatalogue fails on a class of the catalogue chaos neither maps
// nor explains in its entry, TestPlansExerciseEveryClass on one no plan of
// 200 seeds enables, and TestChaos on one its plans enabled eight times or
// more that was never injected.
//
// # The invariants
//
//  1. Grants never overlap (InvNoOverlap): a Machine holds a cluster's lock
//     from the moment Lock returns Acquired until it calls Unlock, it is
//     deleted, or its init completes; no other Machine may be told Acquired
//     in between. Checked at every Lock result. A grant is to one Machine
//     incarnation in one Cluster incarnation, by UID: a Lock called with a
//     Machine or Cluster object that is no longer the live one (a stale
//     view of a re-created object) opens no hold, and is counted. A Cluster
//     restored from an older backup keeps its hold only if the restored
//     register names the holder; otherwise the hold ends, the limit
//     pkg/initlock documents. A lock an upstream
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
//     is deleted by a bootstrap controller other than through Unlock, or
//     by a Lock call withdrawing the lock it wrote for its own Machine,
//     which no grant names (the Cluster turned out paused, or another
//     Machine won the register). A manager's delete of a lock whose holder
//     was created again after the lock's release mark was written, and
//     seen created after the deleting replica last sent a read of it, is
//     the window docs/design.md states (the explorer holds the release to
//     its reading exactly): it is counted, not a violation. A holder back
//     before the mark, or read by the deleting replica since, is a
//     violation.
//     The Watcher records every write to ConfigMaps, Machines and
//     Clusters (grant registers included) with its revision; deletions are judged on the
//     state at their revision, once all three watches have gone past it,
//     and attributed by the UID precondition of the DELETE that made them.
//  5. The right owner (InvRightOwner): every Cluster reference the watcher
//     sees on a restored add-on ConfigMap names the Cluster its own restore
//     created or the one it was backed up with, never an unrelated Cluster
//     of the name or another restore's; once settled, every restored
//     add-on whose restore's Cluster exists is linked to it.
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
//   - Invariant 1 does not follow a grant that a restore brings back
//     without a hold: a Cluster, its Machines and its lock restored
//     together end every hold (the Machines were deleted), even if the
//     restored register names a Machine again.
//   - A Lock called with a Cluster object of an incarnation that is gone
//     (a stale view across a restore) opens no hold, even when Lock read
//     the live Cluster and recorded its grant there: invariant 1 does not
//     check such acquisitions, and the totals count them (acquired for a
//     gone UID).
//   - A Machine or Cluster created so shortly before a Lock call returns
//     that the runner has not yet recorded its UID is taken for a stale
//     view: that call opens no hold, and invariant 1 may miss an overlap
//     with it; it never reports a false one.
//   - Stale views and lagging watches make the interleaving even less
//     replayable: which version a cache serves depends on timing.
//   - Resource versions are compared as numbers, which the API server's
//     etcd storage guarantees and the API does not promise.
package chaos
