// Package velerosuite tests initlock's Velero plugin (internal/velero).
//
// Its cases (Execute, Settings) are written once and run against a
// Backend: the real API server (the tests of this folder) or the model API
// server (internal/kubeenv/apimodel: internal/velero's own tests, which
// need no control plane). They check the owners the action records, with
// their UIDs, on items backed up from the backend and restorable into it,
// and the settings read from the ConfigMap, the deprecated variables or
// the defaults, with the one list of ConfigMaps that is the plugin's only
// request.
//
// The tests of this folder also check, on the real API server (etcd and
// kube-apiserver, through internal/kubeenv), what needs one: the actions
// resolved against its discovery as Velero resolves them, the plugin
// binary loaded over go-plugin's gRPC as the Velero server loads it, its
// settings ConfigMap read again for each restore, and the install commands
// of the documentation.
package velerosuite
