// Package velero is initlock's Velero RestoreItemAction. Velero strips the
// ownerReferences of every object it restores, and the owners come back with
// new UIDs, usually after their dependents (Velero restores ConfigMaps and
// Secrets first and Cluster API Clusters last). So the action cannot restore
// the references itself. Instead it records each item's backed-up
// ownerReferences, with the UIDs they had, in the relink.Annotation
// annotation of the restored item; the relinker in initlock-manager turns
// them back into ownerReferences once it has proven the owners to be the
// backed-up ones (relink.Judge).
//
// The action guarantees that:
//   - it reads only the item as backed up and changes only that one
//     annotation of the restored item, and, on an init lock (a ConfigMap
//     named <cluster>-lock, labelled with its cluster's name, with the data
//     key lock-information whose record has a machineName, as the lock
//     guard tests it; another provider's lock, such as KubeKey's, is
//     left alone), takes off the marks of the live lock a backup
//     may hold: the release mark and its start time, the cluster-absent
//     time and clusterctl move's delete-for-move. A lock restored anew, or
//     written over the live one by --existing-resource-policy=update, thus
//     carries no mark that would let a delete through;
//   - it writes no ownerReference: the UIDs it records are the backed-up
//     owners', a proof of identity for the relinker, which writes only
//     UIDs it read live (an ownerReference to a UID that no longer exists
//     would let the garbage collector delete the object);
//   - items without ownerReferences are returned untouched, but for a
//     lock's marks;
//   - owners already recorded in the annotation (a backup taken while a
//     previous relink was pending, in either format of the annotation) are
//     kept, and an annotation that is not valid fails the item with an
//     error naming it.
//
// It links nothing itself. Which items it applies to is set by Config,
// which Settings reads when Velero creates the actions for a restore: from
// a ConfigMap in Velero's namespace labelled as Velero's documentation asks
// of plugins (PluginConfigLabel and SettingsLabel), else from the
// deprecated environment variables of the Velero server (ConfigFromEnv),
// else the defaults. That one list of ConfigMaps per action and restore is
// its only request to the API server.
package velero
