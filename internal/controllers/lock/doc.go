// Package lock is the controller that keeps every control-plane init lock of
// a management cluster owned, released and collected. It reconciles one
// Cluster at a time (the request is the Cluster's namespace and name, which
// also names its lock "<cluster>-lock") through the library's
// keeper.Keeper, whose documentation states what a reconcile guarantees
// (at most one write, confirmed against the API server; nothing while the
// Cluster is paused; an orphan collected only after its grace period), and
// keeps the metrics below from what each reconcile reports.
//
// # What it reads
//
// The manager's cache holds only ConfigMaps with the cluster-name label,
// Clusters and Machine metadata, which is what a Keeper needs: a
// ConfigMap named "<cluster>-lock" without the label is looked for live by
// the Keeper, once per Cluster UID and generation. Initialized Clusters,
// whose locks are released, cost no live read.
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
//     string except "free" (no lock) and "lost" (which needs grant
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
