// Package lock is the controller that keeps every control-plane init lock of
// a management cluster owned, released and collected. It reconciles one
// Cluster at a time (the request is the Cluster's namespace and name, which
// also names its lock "<cluster>-lock"), observes the lock, the Cluster and
// the holder Machine, and acts through engine.Decide and engine.Apply.
//
// # What it guarantees
//
//   - At most one write per reconcile, made with the resourceVersion read
//     (patches) or the UID and resourceVersion as preconditions (deletes).
//     A healthy lock gets no write, and a lock is not written twice from the
//     same resourceVersion: after a write the controller waits for its cache
//     to show the result before deciding again.
//   - No write at all, not even an event, while the Cluster is paused.
//   - A ConfigMap with the lock's name that is not a lock, and a corrupt
//     lock, are never written; each gets one Warning event per
//     resourceVersion (ForeignConfigMap, CorruptLock) and shows in the
//     initlock_locks gauge.
//   - An orphan lock is collected only after its Cluster has been absent for
//     the grace period recorded on the lock (so restarts do not reset it),
//     after a live read has confirmed that its holder Machine is gone.
//     The absence is recorded only after the lock has been seen orphaned for
//     Policy.OrphanSettle: the reconciler remembers since when
//     (engine.Observation.AbsentSince) and engine.Decide waits, which spares
//     a write per lock when a restore brings ConfigMaps back before their
//     Clusters. The pause, too, is engine.Decide's: the reconciler makes no
//     decision of its own.
//   - A holder Machine the cache does not know is confirmed absent by a live
//     read before any write that depends on it.
//
// # What it reads
//
// The cache holds only ConfigMaps with the cluster-name label, Clusters and
// Machine metadata. A ConfigMap named "<cluster>-lock" without the label is
// therefore invisible to the cache: the controller looks for one with a live
// GET only for Clusters that exist, are neither paused, deleting nor
// initialised, and have no lock in the cache, once per Cluster UID and
// generation (and on every reconcile while one is found). Initialized
// Clusters, whose locks are released, cost no live read.
//
// # What it does not do
//
// It never creates a lock (bootstrap providers do), never reads grant
// records (the keeper's decision does not need them) and never touches
// Secrets.
//
// # Events
//
// Events use the events.k8s.io API with the reasons LockAdopted,
// LockReleased, OrphanLockCollected, CorruptLock and ForeignConfigMap, on the
// Cluster, or on the ConfigMap when there is no Cluster. Warnings are emitted
// once per resourceVersion of the offending ConfigMap, remembered in memory;
// a restart may repeat them once.
//
// # Metrics
//
// On the controller-runtime registry:
//
//   - initlock_locks{state}: locks by verdict. The states are the values of
//     initlock.Verdict except "free" (no lock) and "lost" (which needs grant
//     records): healthy is a lock held by an existing Machine and owned by
//     its Cluster (the "held" state), unowned, stale-holder, held-after-init,
//     orphan, corrupt and foreign.
//   - initlock_lock_adoptions_total, initlock_lock_releases_total{reason}
//     (initialized, cluster-deleting), initlock_orphan_locks_collected_total.
//   - initlock_lock_warnings_total{reason} (CorruptLock, ForeignConfigMap).
//   - initlock_lock_hold_duration_seconds: from the record's acquiredAt, or
//     the ConfigMap's creation when the record has none, to the release or
//     the collection.
package lock
