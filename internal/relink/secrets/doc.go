// Package secrets is the opt-in relinking of Secrets. The relinker's
// default kinds leave Secrets out, so that the default install grants no
// access to them at all; Enable adds them, and the RBAC markers of this
// package (generated into config/relink-secrets/role.yaml, a ClusterRole of
// its own that the config/relink-secrets overlay binds) grant what it then
// needs. initlock-manager --relink-secrets calls Enable.
//
// It guarantees that the relinker, once Secrets are enabled, lists and
// watches them as metadata only and patches only their ownerReferences and
// its own annotation, and only for Secrets labelled with a Cluster name
// (relink.DefaultSelectors), unless Options.Selectors says otherwise.
//
// Its limit is RBAC's: a "list" grant on Secrets cannot be restricted to
// metadata, so the ClusterRole would also let the manager's account read
// Secret data. That is why it is opt-in.
package secrets
