// Package contention benchmarks the init lock under contention on a real
// control plane: many control-plane Machines of one Cluster call Lock at
// the same moment, once with pkg/initlock and once with the lock of the
// kubeadm bootstrap provider of Cluster API v1.14.2
// (sigs.k8s.io/cluster-api/bootstrap/kubeadm/pkg/locking), in the same
// run. Its tests run that upstream lock against initlock's Lock and
// initlock-manager in the races between them (TestUpstreamUnlockRace: the
// upstream Unlock of a lock initlock has just taken over, held back by the
// manager's finalizer). It is a module of its own so that the library's
// module does not depend on Cluster API; it holds nothing but this file
// and its tests.
//
// Flags (after -args): -contention.callers (default 50).
package contention
