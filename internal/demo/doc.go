// Package demo is the story that "make demo" tells: on a real local control
// plane (etcd, kube-apiserver and kube-controller-manager from
// internal/kubeenv, with the Cluster API CRDs), with initlock-manager running
// in the same process, it shows the defects of the upstream control-plane
// init lock and how initlock fixes them:
//
//  1. The seed scenario. A control-plane Machine holds its Cluster's lock
//     (taken with pkg/initlock); the namespace is backed up, deleted and
//     restored as Velero does it (UIDs, ownerReferences and status
//     stripped; ConfigMaps, then Machines, then Clusters). The lock comes
//     back unowned, initlock-manager re-adopts it, and the garbage
//     collector deletes it with its Cluster.
//  2. A single-node cluster. Once its control plane is initialised,
//     initlock-manager releases the lock that upstream keeps for as long as
//     the Cluster exists.
//  3. The whole object graph. A Cluster with a MachineDeployment, its
//     MachineSet and Machine, a Secret and a held lock is restored through
//     initlock's Velero restore item action; the relinker, added to the
//     manager with relink.ManagerSetup, links every object to its owner's
//     new UID, and deleting the Cluster deletes the whole graph.
//  4. The manager's metrics.
//
// Each step prints what happened, how long it took and PASS or FAIL, and a
// timeline table closes the run.
//
// RunReal (make demo-real) tells the seed's story on the real components
// instead, with the same timeline: two management clusters (kubeenv/stack),
// each with CAPI core and CABPK v1.14.2 and their webhooks, a Velero v1.18.3
// server per cluster on one S3 bucket, the velero and kubectl commands
// printed as a user would type them. With upstream alone the lock is
// restored unowned and outlives its Cluster (the steps pass when the bug
// reproduces); with initlock-manager and initlock's plugin in the second
// cluster, the lock is re-adopted, the graph relinked, and deleting the
// Cluster leaves nothing behind.
//
// # What it guarantees
//
//   - Run returns an error when a step failed or the run was interrupted,
//     and nil only when every step passed.
//   - When Run returns, whatever the outcome (a failed step, a cancelled
//     context), the manager has stopped, etcd, kube-apiserver and
//     kube-controller-manager have exited and the temporary folders of the
//     control plane are removed.
//   - With Options.Keep, Run leaves the control plane and the manager
//     running once the story is told, writes an admin kubeconfig, prints
//     commands to try and returns only when its context is cancelled,
//     cleaning up as above.
//
// # What it does not do
//
//   - Run does not run Cluster API's controllers or any bootstrap provider:
//     the Cluster and Machine objects are created, paused and marked
//     initialised by the demo itself. RunReal does, unmodified.
//   - It sets the global loggers of controller-runtime and klog (to
//     Options.Log, or to nothing), as a program does; it is meant to run
//     once per process.
package demo
