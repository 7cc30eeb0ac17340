// Package locksuite tests the lock reconciler (internal/controllers/lock) by
// calling its Reconcile directly, with an injected clock, against a
// Backend: the real API server (the tests of this folder, with etcd,
// kube-apiserver and kube-controller-manager) or the model API server
// (internal/kubeenv/apimodel: the reconciler's own tests, which need no
// control plane). Each case is written once and asserts the same writes,
// reads, requeues, events and objects on both.
//
// The model has no garbage collector: the check that the garbage
// collector leaves a lock alone runs on the real API server only
// (Backend.GarbageCollector).
//
// The manager as a whole, with its cache and watches, is tested in
// test/manager.
package locksuite
