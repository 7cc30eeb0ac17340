package relink

// The relinker caches the metadata of the relinked kinds (list, watch),
// reads an owner's metadata live before it writes the owner's UID (get),
// and patches their metadata (ownerReferences and its own annotation); it
// never updates or deletes them. Owners of kinds it does not relink are
// read live too, and need get. These rules cover the default kinds;
// Secrets have rules of their own (package secrets), and any kind added
// with --relink-kinds needs rules added by hand. What kube-apiserver's
// admission plugin OwnerReferencesPermissionEnforcement requires more
// (delete on the objects, update on their owners' finalizers) is in package
// enforcement, an opt-in overlay.
//
// +kubebuilder:rbac:groups=cluster.x-k8s.io,resources=clusters;machinedeployments;machinesets;machines;machinepools;machinehealthchecks,verbs=get;list;watch;patch
// +kubebuilder:rbac:groups="",resources=configmaps,verbs=get;list;watch;patch
// +kubebuilder:rbac:groups=events.k8s.io,resources=events,verbs=create;patch
