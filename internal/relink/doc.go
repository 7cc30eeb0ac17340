// Package relink rebuilds the ownerReferences that a Velero restore drops,
// for every object of a Cluster API object graph.
//
// Velero strips ownerReferences from the objects it restores, and the
// owners come back with new UIDs, usually after their dependents. initlock's
// Velero plugin (internal/velero) therefore records each restored object's
// backed-up ownerReferences, without UIDs, in the Annotation annotation; the
// Relinker, which runs in initlock-manager, links the object again once the
// owners exist.
//
// # The annotation
//
// Annotation ("initlock.dev/restored-owner-references") holds a JSON array
// of OwnerRef: apiVersion, kind, name and, when they were set, controller
// and blockOwnerDeletion, in the order of the original ownerReferences.
// Encode, Decode and Merge are the only code that reads or writes it.
//
// # What the Relinker guarantees
//
//   - It watches the configured kinds (DefaultKinds: the Cluster API core
//     kinds and ConfigMaps labelled with a Cluster name; Secrets so labelled
//     only when enabled, see package secrets) in its own
//     cache of metadata only; Clusters also keep spec.paused.
//   - For an object with the annotation it looks each recorded owner up by
//     kind, namespace and name, and writes a reference with the owner's
//     current UID. It never invents a UID: an owner that does not exist, or
//     is being deleted, is waited for, and the object is looked at again
//     when an object of a watched kind with that name appears, and after a
//     backoff otherwise.
//   - References already pointing at an owner's current UID are kept as
//     they are, references to an owner with another UID are corrected, and
//     references to owners not recorded are left alone. An owner recorded
//     as controller is linked as controller only when the object has no
//     other controller reference.
//   - All changes to an object are one JSON merge patch of its metadata,
//     conditional on the resourceVersion read; the annotation is removed in
//     that patch once every recorded owner is linked. An object whose
//     references and annotation are already right is not written. After a
//     patch, the relinker does not write the object again until its cache
//     has seen the patch.
//   - An object belonging to a paused Cluster (by its cluster-name label,
//     by being that Cluster, or by recording it as owner) is left alone
//     until the Cluster is unpaused.
//   - An owner that does not come back leaves the object unlinked: after
//     Options.WarnAfter a Warning event with reason OwnerNotFound is
//     recorded on it, and the gauge initlock_relink_waiting_objects counts
//     it. Nothing is ever deleted.
//   - A patch the API server refuses for lack of permission (under the
//     admission plugin OwnerReferencesPermissionEnforcement: delete on the
//     object, update on the finalizers of an owner referenced with
//     blockOwnerDeletion) leaves that object as it was; a Warning event with
//     reason RelinkForbidden names the permission, the counter
//     initlock_relink_forbidden_patches_total counts it, and the object is
//     tried again after Options.MaxBackoff. Other objects are not held up.
//
// # What it does not do
//
//   - Objects of kinds that are not relinked, or outside the selectors,
//     keep the annotation. Owners of kinds that are not watched are read
//     live, and found only by the backoff, not by a watch. An owner of a
//     watched kind is looked for only in the cache, so it must match the
//     kind's selector (a ConfigMap owner without the cluster-name label is
//     not found).
//   - It does not check that an owner found by name is the object that was
//     backed up: whatever object has that kind, namespace and name now is
//     the owner, as it would be for a controller adopting it.
//   - Its bookkeeping of waiting objects lives in memory: after a restart,
//     the gauge and the Warning events start again from the objects in the
//     cache.
package relink
