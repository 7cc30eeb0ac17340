package relink

// The relinker caches the metadata of the relinked kinds (list, watch) and
// patches their metadata (ownerReferences and its own annotation); it never
// gets, updates or deletes them. For Secrets, list and watch are requested
// as metadata only, but RBAC cannot express that: the grant would also allow
// reading Secret data. These rules cover the default kinds; add rules for
// any kind added with --relink-kinds.
//
// +kubebuilder:rbac:groups=cluster.x-k8s.io,resources=clusters;machinedeployments;machinesets;machines;machinepools;machinehealthchecks,verbs=list;watch;patch
// +kubebuilder:rbac:groups="",resources=configmaps;secrets,verbs=list;watch;patch
// +kubebuilder:rbac:groups=events.k8s.io,resources=events,verbs=create;patch
