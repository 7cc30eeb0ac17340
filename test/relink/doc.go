// Package relinksuite tests the relinker (internal/relink) on the real
// control plane (etcd, kube-apiserver and kube-controller-manager, through
// internal/kubeenv): the relinker in a manager, with its cache and
// watches, against restores made by the Velero simulator with initlock's
// plugin, under RBAC limited to its markers, with lagging watches, and its
// benchmark.
package relinksuite
