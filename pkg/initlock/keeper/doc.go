// Package keeper keeps clusters' init locks: it is what the initlock manager
// runs for each Cluster, and what a program that heals locks (a controller
// of its own, a tool) uses in its place. Providers do not need it: they take
// and release locks through package initlock.
//
// A Keeper looks at the lock of one Cluster (Keep), decides what to do with
// it as the library's decision core does for every writer, and makes at
// most one write, confirmed against the API server first. It adopts a lock
// whose Cluster's UID changed (a restore, a move), releases it once the
// control plane is initialised or the Cluster is deleting, releases it when
// its holder Machine is gone and no grant protects another Machine, and
// collects a lock whose Cluster stayed absent for Policy.OrphanGrace.
//
// A tool that shows a plan before it acts (kubectl initlock repair) calls
// Inspect, which reads and decides without writing, then Apply, which
// confirms and writes. An operator's release of a lock whoever holds it
// (kubectl initlock release) is Inspect with Query.Release, then Release,
// bound to what Inspect read. Every decision is the library's: these calls
// decide nothing of their own.
//
// # What it guarantees
//
//   - At most one decision's writes per Keep: one patch, made with the
//     resourceVersion read, or, for a release or a collection, the release
//     mark and then the delete, with the UID and resourceVersion as
//     preconditions (and the mark taken off again when the release stops).
//     A healthy lock gets no write. After a write the Keeper waits for its
//     reader (a cache) to show the result before deciding again, so that a
//     lock is not written twice from the same resourceVersion, unless the
//     answer to the write was lost: the next Keep then makes it again, and
//     its precondition fails.
//   - Every write is decided on what Keeper.Client shows, which may be a
//     cache, and confirmed against Keeper.APIReader before it is made: no
//     lock is adopted for, or released on behalf of, a Cluster that the
//     cache still shows but that was deleted, created again or paused since.
//   - No write while the Cluster is paused: a write is confirmed against
//     the Cluster read live. A pause that lands between that reading and
//     the write does not stop it. The Warning events below are judged on
//     Client's view of the Cluster alone: one may be emitted while a
//     cache still shows a Cluster paused since as unpaused.
//   - A ConfigMap with the lock's name that is not a lock, and a corrupt
//     lock, are never written; each gets one Warning event per
//     resourceVersion (ForeignConfigMap, CorruptLock).
//   - An orphan lock is collected only after its Cluster has been absent for
//     the grace period recorded on the lock (so restarts do not reset it),
//     after a live read has confirmed that its holder Machine is gone. The
//     absence is recorded only after the Keeper has seen the lock orphaned
//     for Policy.OrphanSettle, which spares a write per lock when a restore
//     brings ConfigMaps back before their Clusters.
//
// # What it reads
//
// Keeper.Client needs to show only ConfigMaps with the cluster-name label,
// Clusters and Machine metadata. A ConfigMap named "<cluster>-lock" without
// the label is looked for with a live GET only for Clusters that exist, are
// neither paused, deleting nor initialised, and show no lock, once per
// Cluster UID and generation (and on every Keep while one is found).
//
// # Events
//
// With a Recorder, Keep emits LockAdopted and LockReleased (Normal, on the
// Cluster), OrphanLockCollected (Normal, on the lock), and the Warnings
// ForeignConfigMap, CorruptLock, LockConflict and LockUnmarked, on the
// Cluster or, when there is none, on the ConfigMap; a Warning once per
// resourceVersion of the ConfigMap.
//
// # Limits
//
// A Keeper remembers, per Cluster, since when it has seen a lock orphaned,
// the warnings it emitted and its last write. This memory is an
// optimisation and a spam filter: losing it (a restart) costs at most one
// read, one repeated warning or a longer orphan grace, never a wrong write.
// One Keeper must not keep the same Cluster from two goroutines at once (a
// controller's work queue guarantees it).
package keeper
