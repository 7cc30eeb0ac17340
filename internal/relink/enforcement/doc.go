// Package enforcement holds no code: its RBAC markers are what the
// relinker needs besides its own rules (package relink) on a management
// cluster whose kube-apiserver runs the admission plugin
// OwnerReferencesPermissionEnforcement (OpenShift, Cluster API's end-to-end
// clusters). make generate writes them into the ClusterRole
// initlock-owner-references-enforcement of
// config/owner-references-enforcement, an opt-in overlay, so that other
// installs do not grant them.
//
// Under that plugin a client may change an object's ownerReferences only if
// it may delete the object, and may set blockOwnerDeletion only if it may
// update the owner's finalizers subresource. The relinker puts references
// back exactly as recorded, so it needs delete on the default kinds that
// have owners (all but Clusters, which Cluster API gives no owner; and
// ConfigMaps, which the lock controller may delete anyway) and update on
// the finalizers of the default kinds that Cluster API makes controllers of
// others (relink.DefaultBlockingOwnerKinds). It never deletes them: the
// admission policy initlock-manager-guardrail (config/guardrail) refuses
// the manager's ServiceAccount any delete but that of an init lock.
//
// +kubebuilder:rbac:groups=cluster.x-k8s.io,resources=machinedeployments;machinesets;machines;machinepools;machinehealthchecks,verbs=delete
// +kubebuilder:rbac:groups=cluster.x-k8s.io,resources=machinedeployments/finalizers;machinesets/finalizers;machinepools/finalizers,verbs=update
package enforcement
