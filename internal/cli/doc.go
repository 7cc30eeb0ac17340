// Package cli implements kubectl-initlock, the kubectl plugin that shows
// and repairs the Cluster API control-plane init locks of a management
// cluster: list, repair, release and version; relinks, which lists the
// restored objects the relinker has not linked, with relink.Judge's
// verdict for each recorded owner (relink.FindPending: one list per kind,
// one live read per owner); and doctor, which reads the install (the lock
// guard, the manager, its roles, the Velero plugin, the versions, the locks
// that need a person) and judges each part with a remedy, writing nothing.
//
// The commands are built with cobra and k8s.io/cli-runtime's
// genericclioptions, so --kubeconfig, --context, -n and the other kubeconfig
// flags mean what they mean in kubectl. NewRootCommand takes its streams,
// clock and rest.Config wrapper from Options, and may take a client and the
// Cluster API version in place of the kubeconfig's, so that the commands
// run in process in tests, against the model API server as well as a real
// one (test/cli).
//
// # What it guarantees
//
//   - Every verdict and action comes from the library's decision
//     (keeper.Inspect), and every repair write is made by keeper.Apply,
//     confirmed against the API server first (a patch with a resourceVersion
//     precondition; a release is the release mark, then a delete with UID
//     and resourceVersion preconditions); a lock that changed meanwhile is
//     observed and decided again, at most 5 times.
//   - repair never deletes a lock whose holder Machine exists on a Cluster
//     whose control plane is not initialised (Decide never asks it to, not
//     even for a Cluster being deleted), and never writes to a corrupt lock
//     or to a ConfigMap that is not a lock.
//   - release refuses while the holder exists and the control plane is not
//     initialised unless --force, and never touches a ConfigMap that is not
//     a lock. It releases through keeper.Release, bound to what it
//     inspected: the lock's UID and resourceVersion (or that there was
//     none) and the grant register's value; a lock or a register that
//     changed in between is not released (a conflict).
//   - The JSON and YAML output of list is a LockList, that of relinks a
//     RelinkList, both of apiVersion initlock.dev/v1alpha1, to which fields
//     are only ever added; one printer serves each format (print.go).
//   - list (-o wide, json, yaml) and repair decide with the settings of the
//     installed initlock-manager, read from the arguments of its Deployment
//     (label app.kubernetes.io/name=initlock-manager): its policy and its
//     scope (--namespace, --watch-filter), so that no action is shown or
//     taken that the manager would not take; flags given on the command
//     line win, and the command says which policy it used (policy.go).
//   - repair and release change nothing without a "y" on the input stream,
//     whatever the output is, unless --yes; release --dry-run=client and
//     repair --dry-run=client make no write.
//   - Without any kubeconfig (and outside a Pod) every command fails with
//     an error naming where it looked; none falls back to localhost:8080.
//   - list and release of a name with neither a Cluster nor a lock fail
//     with the API server's NotFound, printed as kubectl prints it.
//   - Exit codes: 0 success, 1 error or refusal, 2 (repair) locks remain that
//     need a person, or (doctor) a check failed or could not be made.
//
// # What it does not do
//
//   - It does not watch: each command reads once (see package inventory)
//     and acts on what it read.
//   - repair does not recreate a lost lock (deleted while a Machine holds
//     its grant): the bootstrap provider's next Lock does, for that Machine.
//   - repair does not take over a lock whose holder is gone on an
//     uninitialised cluster: the next Machine that asks for the lock does.
//   - Colour is used only on a terminal, and not with NO_COLOR or TERM=dumb.
package cli
