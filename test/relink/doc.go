// Package relinksuite tests the relinker (internal/relink).
//
// Its reconcile cases (Reconcile) call the relinker's Reconcile directly,
// on a relinker of relink.NewForClient with an injected clock, against a
// Backend: the real API server (the tests of this folder) or the model
// API server (internal/kubeenv/apimodel: internal/relink's own tests,
// which need no control plane). Each case is written once and asserts the
// same references, requests, requeues, events and gauges on both. The
// restored objects are made by the Velero simulator (velerosim) and
// initlock's plugin action. The model serves Clusters, Machines and
// ConfigMaps only, so the cases use no other kind. Pending runs
// relink.FindPending, what kubectl initlock relinks lists, on both alike.
//
// The tests of this folder also run the relinker in a manager, with its
// cache and watches, on the real control plane (etcd, kube-apiserver and
// kube-controller-manager, through internal/kubeenv): restores of whole
// graphs, Velero's restore options, RBAC limited to its markers, lagging
// watches, request bounds, and its benchmark.
package relinksuite
