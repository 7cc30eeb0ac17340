// Package stack runs the real third-party software initlock works with,
// unmodified, beside kubeenv's local control plane: the Velero server
// v1.18.3 with its AWS object-store plugin v1.14.3 and initlock's own Velero
// plugin, an S3 server over gofakes3 holding the bucket, and Cluster API's
// core manager and kubeadm bootstrap provider (CABPK) v1.14.2; plus
// initlock-manager, built from this work tree, as a process with its own
// kubeconfig and the RBAC of config/rbac, installed with its lock guard
// (config/protection) as config/default installs it, or without it on
// demand (ManagerOptions). make test-real (test/real) and make demo-real
// use it.
//
// A Mgmt is one management cluster: a kubeenv.Env with Cluster API's core
// and kubeadm bootstrap CRDs (the latter with the contract label kustomize
// adds), Velero's CRDs and a minimal infrastructure provider of our own
// (LocalCluster and LocalMachine in infrastructure.initlock.dev, which
// nothing reconciles: a test sets their status as a provider would). CAPI
// core and CABPK run as processes with their webhook servers on local ports
// and a self-signed certificate; RegisterWebhooks installs their modules'
// config/webhook configurations pointed at those servers, with the CA as
// caBundle, so that every write to a Cluster API object goes through them as
// in a real management cluster. The API server's audit log records every
// write with its user (Writes), so that a test can count who wrote what.
//
// Binaries come from the cache hack/stack.sh fills (make stack) and, for
// initlock's own, from the paths the caller built (FindBinaries). Nothing is
// downloaded at run time.
//
// Limits: the Velero server's controller manager always binds :8080, so at
// most one Velero server runs at a time on the machine (StartVelero,
// StopVelero), and nothing else may use that port meanwhile. Stop ends every
// process a Mgmt started and removes its files (INITLOCK_KEEP_LOGS=1 keeps
// them, for a failed run's logs).
package stack
