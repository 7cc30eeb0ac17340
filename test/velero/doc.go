// Package velerosuite tests initlock's Velero plugin (internal/velero) on
// the real API server (etcd and kube-apiserver, through internal/kubeenv):
// the actions resolved against the API server's discovery as Velero
// resolves them, the plugin binary loaded over go-plugin's gRPC as the
// Velero server loads it, its settings ConfigMap read for each restore,
// and the install commands of the documentation.
package velerosuite
