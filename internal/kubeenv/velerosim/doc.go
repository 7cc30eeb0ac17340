// Package velerosim is the one fast simulator of a Velero backup and restore
// that initlock's unit, chaos and demo code use instead of a Velero server:
// objects in, restored objects out, created on a real API server in
// milliseconds. make test-real checks it against the real Velero v1.18.3
// server (test/real, TestSimulatorFidelity): the same objects backed up and
// restored by both must come back alike.
//
// # What it backs up, as Velero's backup does
//
// Backup reads the objects of the kinds it is given in one namespace, less
// every object being deleted (a deletionTimestamp set, held back by a
// finalizer): Velero v1.18.3 skips those items (pkg/backup/item_backupper.go,
// "Skipping item because it's being deleted"), so a backup taken while an
// object waits on its finalizers does not hold it, and a restore does not
// bring it back. List reads the same objects, those being deleted included.
//
// # What it does, as Velero's restore does (pkg/restore/restore.go)
//
//   - Order: items are created by resource in Velero's default restore
//     priorities (namespaces, ..., secrets, configmaps, ... first; the others
//     alphabetically by resource name; clusters.cluster.x-k8s.io among the
//     last), and by namespace and name within a resource.
//   - Metadata: generateName, selfLink, uid, resourceVersion, generation,
//     creationTimestamp, deletionTimestamp, deletionGracePeriodSeconds and
//     ownerReferences are removed; labels, annotations and finalizers are
//     kept, and managedFields are set back to the backed-up ones with a
//     merge patch after the create, as Velero does (the API server would
//     otherwise record the restore labels and the plugin's annotation under
//     the backup's managers: the one difference the fidelity test found in
//     the first version of the simulator).
//   - Status is dropped, except for the resources in StatusResources
//     (velero restore --status-include-resources), whose status is written
//     through the status subresource after the create, as Velero does.
//   - Restore item actions (initlock's Velero plugin among them) run on the
//     items they apply to, resolved by Velero's own resolver from their
//     AppliesTo, with Item reset as above and ItemFromBackup as backed up;
//     like Velero, the label selector is matched before the restore labels
//     are added and the action sees the item in its backed-up namespace.
//   - Then the namespace is mapped (NamespaceMapping, as
//     --namespace-mappings) and the labels velero.io/backup-name and
//     velero.io/restore-name are added.
//
// Options.Workers, for benchmarks that restore thousands of objects,
// creates up to that many items of one resource at once; the resources
// still come one after the other in Velero's order. Velero creates one item
// at a time.
//
// Restore is the helper tests restore with: it converts typed objects,
// restores them and fails the test on an error.
//
// # Naive copies
//
// Options.Naive makes the copy that docs/design.md calls naive, a
// "kubectl get -o yaml" of the backup applied again: the same metadata is
// reset except ownerReferences, which keep the old owners' UIDs; no Velero
// label is added and no restore item action runs.
//
// # Known differences from the real Velero server
//
// TestSimulatorFidelity restores a paused Cluster's graph (Cluster,
// Machines, KubeadmConfigs, infrastructure objects, the lock, a Secret, a
// ConfigMap with a finalizer, owners with and without controller) from one
// backup with both, initlock's plugin in each, once as the seed does and
// once with the infrastructure objects' status, and finds no difference in
// any field, label, annotation, ownerReference, status or in the order of
// creation; an object being deleted at the time of the backup (a ConfigMap
// held back by a finalizer) is in neither Velero's backup nor Backup's.
// What the simulator does not do at all, by design:
//
//   - Backup lists only the kinds it is given, in the version the caller
//     names; Velero backs up every resource of the namespace in the API
//     server's preferred version. Callers name the kinds they restore.
//   - Velero creates a missing target namespace from the backed-up one
//     (with its labels); the simulator expects the namespace to exist.
//   - Velero skips an item that already exists (a warning in the restore's
//     results, as for kube-root-ca.crt, which the API server publishes in
//     every namespace); the simulator fails with the API server's
//     AlreadyExists error, so a test never mistakes a leftover for a
//     restored object. Backup leaves kube-root-ca.crt out.
//   - Velero restores ServiceAccounts, Pods, PersistentVolumes and their
//     claims with extra rules (merging, volume binding); the simulator has
//     none of them: initlock's objects are not of those kinds.
//
// The simulator needs the objects' kinds to be served by the API server it
// restores into.
package velerosim
