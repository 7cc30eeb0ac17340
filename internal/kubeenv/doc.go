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
// It is also the one kit of test helpers the project's tests, benchmarks,
// demo and chaos runs share, each in one place:
//
//   - GetLock reads a Cluster's lock, nil when there is none (MustGetLock
//     for a test, LockGone to wait for its end); SetInitialized writes a
//     Cluster's status as Cluster API does once its control plane is
//     initialised.
//   - Counter counts the requests made through a rest.Config by verb,
//     resource, namespace, object and answer, and keeps those
//     authorisation refused.
//   - StartManager runs a controller-runtime manager in the test's process
//     with its requests counted, and stops it when the test ends.
//   - Recorder records the events a component emits (type, reason,
//     regarding object and note), for a test to compare.
//   - ParseMetrics reads any /metrics page with Prometheus's own parser;
//     Env.Metrics reads the API server's, and AdmissionTimes the time its
//     admission plugins spent.
//   - ReadLockGuard reads the lock guard the binaries embed
//     (config/protection, through lockguard.Shipped), named as installed;
//     InstallLockGuard and UninstallLockGuard put it in place and take it
//     away, and WeakenLockGuard takes its force away while it stays
//     installed, each returning once the API server enforces (or no
//     longer enforces) it.
//   - StartLogged and StartProcess run a program in a process group of its
//     own with its output in a log file, and end the group.
//   - Restoring as Velero does is velerosim's, with velerosim.Restore for
//     tests.
//   - Reading and writing initlock's objects as documented (the lock's
//     record, the grant register, the marks) is wire's, which shares no
//     code with the library, so that the tests check the format too.
//
// The package guarantees that Stop ends every process it started and removes
// every temporary folder it made, that StartProcess and StartManager end
// what they started when the test ends, and that a Counter counts a request
// when it is sent (its answer's status once it comes). It does not isolate
// tests from each other beyond the namespace: cluster-scoped objects are
// shared.
package kubeenv
