// Package hardened holds tests against a kube-apiserver with the admission
// plugin OwnerReferencesPermissionEnforcement on, as OpenShift and Cluster
// API's end-to-end clusters run it: changing an object's ownerReferences
// needs delete on the object, and setting blockOwnerDeletion needs update on
// the owner's finalizers subresource. The manager, with the relinker, runs
// as a user bound only to the generated ClusterRole of config/rbac.
package hardened
