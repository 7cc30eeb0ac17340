// Package inventory reads, from the API server, everything needed to judge
// every Cluster API init lock in a namespace or in a whole management
// cluster, and turns it into one keeper.Status per cluster: what was read
// and the decision on it. It is read-only.
//
// # What it reads
//
// Gather makes a fixed number of list calls, whatever the size of the fleet
// (each paginated):
//
//  1. the Clusters, as unstructured objects, in the Cluster API version the
//     server prefers (capi.Discover: v1beta2, else v1beta1), only those of
//     Options.ClusterSelector when it is set;
//  2. the ConfigMaps that carry the label cluster.x-k8s.io/cluster-name, in
//     full (locks are small); one named "<label value>-lock" is that
//     cluster's lock;
//  3. only when some Cluster has no labelled lock: the ConfigMaps as
//     metadata only (names and labels, never data), to find ConfigMaps that
//     take a Cluster's lock name without being its lock ("foreign"). Each one
//     found is then read in full with a GET, so that it is classified by
//     initlock exactly as the manager would classify it;
//  4. the Machines, as metadata only, for the holder of each lock and for the
//     Machine each Cluster's grant register names.
//
// The metadata-only list of step 3 was chosen over a GET per Cluster without
// a labelled lock because, once locks are released after init, that is most
// Clusters of a fleet: one list (of metadata only) costs less than thousands
// of GETs, and it needs no permission beyond the list that step 2 needs
// anyway.
//
// ConfigMaps are listed before Machines: a lock names a Machine that existed
// when the lock was written, so a holder that still exists is always seen.
//
// # What it does not do
//
// It takes no decision of its own (keeper.Inspect decides, on what was
// listed) and makes no write (keeper.Apply, keeper.Release and
// initlock.Locker do). Its view is a set of lists taken one after the
// other, not a snapshot: every write made from it must carry
// preconditions, as keeper.Apply's do, and a conflict means "observe that
// lock again" (Observe).
package inventory
