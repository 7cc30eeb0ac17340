// Package apimodel is a model of kube-apiserver for the objects the init
// lock touches (ConfigMaps, Cluster API Clusters and Machines, the
// Deployments kubectl-initlock reads the manager's policy from, and the
// lock guard's ValidatingAdmissionPolicy and binding it reads), for the
// exhaustive explorer in internal/explore and the tests that need no
// control plane (the lock reconciler's, the CLI's, the relinker's
// Reconcile, the Velero plugin's). Its Client implements
// controller-runtime's client.Client, so the real code (the Locker, the
// lock reconciler, the CLI, the relinker) runs against it unchanged, and
// every request goes through a Gate that decides when it reaches the Store
// and what its caller gets back.
//
// # What it models
//
//   - A linearizable store with UIDs and resourceVersions (one revision
//     counter, as etcd's), keeping every version of every object, so that a
//     cache may show any of them.
//   - Create fails with AlreadyExists on a taken name. Patch applies JSON
//     patches (with their test operations) and merge patches as the library the API server uses does
//     (gopkg.in/evanphx/json-patch.v4): natively for the operations and
//     paths the project's writers send, with the library for the rest and
//     for every patch that fails, so errors are the library's (a fuzz test
//     holds the two to the same results); a failed
//     JSON patch answers 422 Invalid, a resourceVersion in the patched object
//     other than the current one 409 Conflict. Delete honours UID and
//     resourceVersion preconditions (409 Conflict). A write that changes
//     nothing writes nothing. Writes of a Cluster or Machine keep its status
//     (a status subresource) and bump its generation when the spec changes.
//   - List, of one namespace or all, by label selector (equality and
//     set-based), typed, unstructured or metadata-only: items sorted by
//     namespace and name, and the list's resourceVersion the last revision
//     written, as a consistent list's is etcd's current revision. Pages
//     (limit and continue): every page is read at the revision of the
//     list's first page, as the API server reads them.
//   - Finalizers: a delete of an object that has some marks it for
//     deletion; it goes once the last is removed, and takes no new one.
//   - Admission by the project's lock guard (Guard, Store.SetGuard): the
//     ValidatingAdmissionPolicy of config/protection, evaluated on deletes
//     and updates of ConfigMaps with kube-apiserver's own policy code. The
//     policy and binding objects a client writes are stored and read back
//     as any object, without the API server's defaults: what the store
//     enforces is SetGuard's, whatever they hold.
//
// TestConformance runs the same scripted requests against the model and the
// real API server and compares status codes, reasons, objects and lists.
//
// # What it does not model
//
//   - Watches, field selectors, lists at a given resourceVersion (all
//     refused), the remainingItemCount of a page, the expiry of continue
//     tokens, server-side apply, subresources, discovery, authorisation,
//     other admission (webhooks, other policies, validation of the CRD
//     schemas), the garbage collector and namespaces (a namespace being
//     deleted): the explorer plays the garbage collector's and people's
//     deletions as events.
//   - The exact wording of error messages, and UIDs in UUID form.
package apimodel
