// Package managersuite tests the initlock manager (internal/manager) as it
// runs: started in the test's process against a real API server (etcd,
// kube-apiserver, kube-controller-manager and the project's lock guard),
// with its cache, watches, leader election, events, metrics and the rights
// of config/rbac, and every request it makes counted (test/managertest).
// It holds tests only.
//
// The lock reconciler's decisions, one reconcile at a time, are tested on
// both the model and the real API server in test/controllers/lock; a
// manager needs watches, which the model does not serve, so the tests of
// this folder need a control plane.
package managersuite
