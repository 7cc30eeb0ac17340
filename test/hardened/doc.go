// Package hardened holds tests against a kube-apiserver with the admission
// plugin OwnerReferencesPermissionEnforcement on, as OpenShift and Cluster
// API's end-to-end clusters run it: changing an object's ownerReferences
// needs delete on the object, and setting blockOwnerDeletion needs update on
// the owner's finalizers subresource. The manager, with the relinker, runs
// as a user bound only to the generated ClusterRoles of config/rbac and of
// the opt-in overlay config/owner-references-enforcement; and as its own
// ServiceAccount under the admission policy of config/guardrail, which
// refuses that ServiceAccount any write to a ConfigMap that is not an init
// lock and any delete but an init lock's, whatever RBAC grants it.
package hardened
