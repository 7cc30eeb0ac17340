package relink

// The relinker caches the metadata of the relinked kinds (list, watch),
// reads an owner's metadata live before it writes the owner's UID (get),
// and patches their metadata (ownerReferences and its own annotation); it
// never updates or deletes them (delete is granted for the admission check
// below, never used). Owners of kinds it does not relink are read live too,
// and need get. These rules cover the default kinds;
// Secrets have rules of their own (package secrets), and any kind added
// with --relink-kinds needs rules added by hand.
//
// Under kube-apiserver's admission plugin OwnerReferencesPermissionEnforcement
// (OpenShift, Cluster API's end-to-end clusters) a client may change an
// object's ownerReferences only if it may delete the object, and may set
// blockOwnerDeletion only if it may update the owner's finalizers
// subresource. The relinker puts references back exactly as recorded, so it
// needs delete on the default kinds that have owners (all but Clusters,
// which Cluster API gives no owner) and update on the
// finalizers of the default kinds that Cluster API makes controllers of
// others (DefaultBlockingOwnerKinds).
//
// +kubebuilder:rbac:groups=cluster.x-k8s.io,resources=clusters;machinedeployments;machinesets;machines;machinepools;machinehealthchecks,verbs=get;list;watch;patch
// +kubebuilder:rbac:groups="",resources=configmaps,verbs=get;list;watch;patch
// +kubebuilder:rbac:groups=events.k8s.io,resources=events,verbs=create;patch
// +kubebuilder:rbac:groups=cluster.x-k8s.io,resources=machinedeployments;machinesets;machines;machinepools;machinehealthchecks,verbs=delete
// +kubebuilder:rbac:groups=cluster.x-k8s.io,resources=machinedeployments/finalizers;machinesets/finalizers;machinepools/finalizers,verbs=update
// +kubebuilder:rbac:groups="",resources=configmaps,verbs=delete
