// Package e2e holds initlock's end-to-end tests. They run two real control
// planes side by side, a source management cluster (with the garbage
// collector and the namespace controller) and a target one, and move Cluster
// API objects between them with the clusterctl client library of Cluster API
// v1.14.2, as "clusterctl move" does.
//
// The tests carry the build tag e2e, so that "go test ./..." leaves them out;
// run them with "make test-e2e" (go test -tags e2e ./test/e2e/...).
//
// The move itself runs in a separate program, hack/capi/move, built from the
// hack/capi module, which pins Cluster API v1.14.2 with the dependency
// versions it was released with. make test-e2e builds it and passes its path
// in $INITLOCK_E2E_MOVE; without it, TestMain builds it. The program keeps
// the clusterctl configuration in memory and runs with an empty home
// folder, which the tests check it leaves empty.
//
// What they show: an init lock that lost its ownerReference (as a Velero
// restore leaves it) stays behind in the source on move unless
// initlock-manager re-adopted it first; without that, the grant the
// Cluster's grant register records for the holder still stops a second
// Machine from being granted the lock in the target. An intact lock moves as
// it should.
//
// TestClusterctlUpgradeKeepsLockGuard runs the clusterctl life cycle of the
// add-on on a third control plane of its own, with hack/capi/addon (built
// like the move program; $INITLOCK_E2E_ADDON): "clusterctl init",
// "clusterctl upgrade apply" and "clusterctl delete" of two versions
// rendered from config/clusterctl into a local repository, clusterctl
// reaching the API server through a proxy that delays it 10 ms each way
// ($INITLOCK_E2E_CLUSTERCTL_LATENCY). It shows the lock guard, applied
// with kubectl, in force throughout: a held lock's delete, sent over and
// over, always refused, and the guard's objects never deleted.
//
// They do not run Cluster API's controllers: what those would do (re-adding
// a Machine's Cluster ownerReference after a restore, reporting the
// provisioning status move requires) the tests do by hand, and say so.
package e2e
