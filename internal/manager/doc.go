// Package manager builds the initlock manager: a controller-runtime manager
// that runs the lock controller (internal/controllers/lock) beside Cluster
// API and keeps every "<cluster>-lock" init lock owned by its Cluster,
// releases it once the control plane is initialised and collects it when
// orphaned.
//
// New discovers which Cluster API version the API server serves (v1beta2,
// else v1beta1) and configures the cache to hold only what the controller
// needs: ConfigMaps that carry the cluster-name label (a label selector on
// the informer, so that unrelated ConfigMaps never reach memory), Clusters
// as unstructured objects and Machines as metadata only, all without
// managedFields. Reading any other kind through the cache fails instead of
// starting an informer.
//
// It guarantees that the manager it returns needs no rights beyond those in
// config/rbac (generated from the markers in this package and in the lock
// controller): ConfigMaps get, list, watch, patch and delete; Clusters and
// Machines get, list and watch; ValidatingAdmissionPolicies and their
// bindings get; events.k8s.io Events create and patch;
// TokenReviews and SubjectAccessReviews create, with which the HTTPS metrics
// server (the default, Options.MetricsSecure) authenticates and authorises
// each scrape (get on /metrics, the metrics-reader ClusterRole of
// config/rbac); and, in the manager's namespace, the leader-election Lease
// and its core Events. Options.Validate checks every option before
// anything connects to the API server. With Options.WatchFilter it handles
// only the locks of Clusters labelled with the filter value, as Cluster API
// controllers do; an orphan lock only when it carries the label itself.
//
// With Options.LockGuard it checks, at start and every 5 minutes on
// Options.Clock, that the lock guard is in force (internal/lockguard: two
// GETs), and tells it in the gauge initlock_lock_guard_installed, in its
// log and in events on the guard's ValidatingAdmissionPolicy
// (LockGuardNotInForce, Warning; LockGuardInForce once it is again), the
// log and the events once per change. Readiness does not depend on it: a
// manager that is not ready would not protect a lock either.
//
// It does not start the manager: callers call Start, and several managers may
// run in one process (controller name validation is off for that reason;
// the metrics they share are counted once per process).
package manager
