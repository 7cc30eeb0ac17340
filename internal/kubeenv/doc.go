// Package kubeenv runs a real, local Kubernetes control plane for initlock's
// tests and demo: etcd and kube-apiserver through controller-runtime's
// envtest, the Cluster API CRDs, and kube-controller-manager running only the
// garbage collector and the namespace controller, so that ownerReferences and
// namespace deletion behave as they do in a management cluster.
//
// The binaries come from the cache that hack/kube.sh fills (make kube); the
// CRDs come from the Cluster API module pinned in hack/capi (v1beta2) or
// hack/pins/capi-v1beta1. Nothing is downloaded at run time.
//
// A test package starts one Env from TestMain with Main, and each test takes
// its own namespace with Namespace. Env also adds users with given groups, so
// a component can be run with only the RBAC it is meant to have. Builders
// make valid Clusters, Machines and upstream-format locks (NewCluster,
// NewMachine, NewLock), and WaitGone and DeleteAndWait wait for objects to
// go away.
//
// The package guarantees that Stop ends every process it started and removes
// every temporary folder it made. It does not isolate tests from each other
// beyond the namespace: cluster-scoped objects are shared.
package kubeenv
