//go:build e2e

package e2e_test

import (
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/initlock/initlock/internal/kubeenv"
	"github.com/initlock/initlock/internal/kubeenv/wire"
	"github.com/initlock/initlock/pkg/initlock/capi"
)

// A Velero-style restore strips the lock's ownerReference; initlock-manager,
// running in the source, re-adopts it; the move then carries it with its
// Cluster, and it arrives owned by the Cluster's UID in the target.
func TestMoveAfterRestoreReadoptedByManager(t *testing.T) {
	backup := source.Namespace(t)
	heldLock(t, backup, true)
	ns := source.Namespace(t)
	veleroRestore(t, backup, ns)
	if cm := kubeenv.MustGetLock(t, source.Client, ns, clusterName); cm == nil || len(cm.OwnerReferences) != 0 {
		t.Fatalf("restored lock: %v, want one without ownerReferences", cm)
	}
	reconcileAsClusterAPI(t, ns)

	startManager(t, ns)
	cluster := get(t, source, "Cluster", ns, clusterName)
	kubeenv.Eventually(t, 30*time.Second, func() error {
		cm := kubeenv.MustGetLock(t, source.Client, ns, clusterName)
		if cm == nil {
			return fmt.Errorf("lock %s/%s is gone", ns, lockName)
		}
		return ownedOnlyBy(cm, cluster)
	})

	moveWhole(t, ns)
}

// The same restore, but the move happens before initlock-manager could heal
// the lock (it does not run at all here). The unowned lock is not part of
// the Cluster's object graph, so move leaves it behind in the source, as it
// does upstream. In the target the lock is missing while its holder cp-0
// exists; the grant to cp-0 in the Cluster's grant register, which move
// does carry, keeps a new control-plane Machine from being granted it.
func TestMoveAfterRestoreBeforeHealing(t *testing.T) {
	cases := []struct {
		name string
		// grant: cp-0 acquired through initlock, and the Cluster's grant
		// register names it; else it acquired the upstream lock, which
		// records no grant.
		grant bool
		steps []lockStep
		// holder is who holds the lock in the target at the end.
		holder string
	}{
		{
			name:  "new machine first: refused, lock recreated for the holder",
			grant: true,
			steps: []lockStep{
				// The register names cp-0 and the lock is missing: the lock
				// is created for cp-0, and nothing is recorded for cp-1.
				{machine: secondName, holder: holderName, action: "recreate", recreated: true, writes: 1},
				// cp-0 makes the record cp-1 wrote for it its own, and its grant
				// that of the target's objects, with a new token.
				{machine: holderName, acquired: true, holder: holderName, action: "take-over", writes: 2},
			},
			holder: holderName,
		},
		{
			name:  "holder first: it recreates and holds the lock",
			grant: true,
			steps: []lockStep{
				// Claim ∥ create: the grant is written again for the target's
				// objects.
				{machine: holderName, acquired: true, holder: holderName, action: "create", recreated: true, writes: 2},
				{machine: secondName, holder: holderName, action: "none"},
			},
			holder: holderName,
		},
		{
			// What happens upstream: without a grant nothing remembers
			// cp-0, and a second kubeadm init is granted.
			name:  "holder without a grant: a second init is granted",
			grant: false,
			steps: []lockStep{
				{machine: secondName, acquired: true, holder: secondName, action: "create", writes: 2},
			},
			holder: secondName,
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			backup := source.Namespace(t)
			heldLock(t, backup, tc.grant)
			ns := source.Namespace(t)
			veleroRestore(t, backup, ns)
			reconcileAsClusterAPI(t, ns)

			moveNamespace(t, ns)

			// The upstream defect: the unowned lock stays behind.
			if left := leftInSource(t, ns); !slices.Equal(left, []string{"ConfigMap/" + lockName}) {
				t.Errorf("left in the source after the move: %v, want only the lock", left)
			}
			if cm := kubeenv.MustGetLock(t, source.Client, ns, clusterName); cm != nil && (len(cm.OwnerReferences) != 0 || holderOf(t, cm) != holderName) {
				t.Errorf("lock left in the source: owners %v, holder %s; want no owner and %s", cm.OwnerReferences, holderOf(t, cm), holderName)
			}
			if cm := kubeenv.MustGetLock(t, target.Client, ns, clusterName); cm != nil {
				t.Fatalf("lock %s/%s reached the target: %v", ns, lockName, cm)
			}
			g := wire.GrantFrom(get(t, target, "Cluster", ns, clusterName).GetAnnotations())
			if (g != nil && g.MachineName == holderName) != tc.grant {
				t.Fatalf("grant register of cluster %s/%s in the target: %+v; want a grant to %s: %t", ns, clusterName, g, holderName, tc.grant)
			}

			lockInTarget(t, ns, tc.steps, tc.holder)
		})
	}
}

// The control: an intact lock is owned by its Cluster and moves with it.
func TestMoveIntactLock(t *testing.T) {
	ns := source.Namespace(t)
	heldLock(t, ns, true)

	moveWhole(t, ns)
}

// moveWhole moves namespace ns and checks that nothing of the cluster is
// left in the source and that the lock arrived whole: owned by the
// target's Cluster, held by cp-0 before and after the Lock calls of a new
// Machine and of cp-0 (lockInTarget).
func moveWhole(t *testing.T, ns string) {
	t.Helper()
	moveNamespace(t, ns)
	if left := leftInSource(t, ns); len(left) > 0 {
		t.Errorf("left in the source after the move: %v", left)
	}
	expectMovedLock(t, ns, holderName)
	lockInTarget(t, ns, []lockStep{
		{machine: secondName, holder: holderName, action: "none"},
		// The record and the grant name the UIDs of cp-0 and of the Cluster
		// in the source: Lock relies on neither, and writes both again for
		// the target's objects, with a new token (claim ∥ lock update).
		{machine: holderName, acquired: true, holder: holderName, action: "take-over", writes: 2},
	}, holderName)
}

// expectMovedLock checks that cluster c1's lock in the target is owned by
// the target's Cluster only and held by holder.
func expectMovedLock(t *testing.T, ns, holder string) {
	t.Helper()
	cm := kubeenv.MustGetLock(t, target.Client, ns, clusterName)
	if cm == nil {
		t.Fatalf("no lock %s/%s in the target", ns, lockName)
	}
	if err := ownedOnlyBy(cm, get(t, target, "Cluster", ns, clusterName)); err != nil {
		t.Error(err)
	}
	if got := holderOf(t, cm); got != holder {
		t.Errorf("lock %s/%s in the target is held by %s, want %s", ns, lockName, got, holder)
	}
}

// clearInitialized makes sure the Cluster in the target does not report its
// control plane initialised. Move needs that report in the source, but it
// creates the Cluster in the target without status (the status subresource
// drops it on create; clusterctl v1.14.2 does not write it back), and Cluster
// API recomputes it there. Until it reports the control plane initialised
// again, the Cluster reads as not initialised: the window in which a
// bootstrap provider would grant a second kubeadm init, and the only one in
// which grants count. Should a later clusterctl carry the status
// across, clearing it stands for the time before Cluster API recomputes it.
func clearInitialized(t *testing.T, ns string) {
	t.Helper()
	cluster := get(t, target, "Cluster", ns, clusterName)
	if !capi.IsControlPlaneInitialized(cluster) {
		return
	}
	t.Logf("cluster %s/%s arrived in the target reporting its control plane initialised; clearing it", ns, clusterName)
	cluster.Object["status"] = map[string]any{}
	if err := target.Client.Status().Update(t.Context(), cluster); err != nil {
		t.Fatalf("clearing the status of cluster %s/%s: %v", ns, clusterName, err)
	}
}

// addSecondMachine creates control-plane Machine cp-1 in the target, as the
// control-plane provider does when it scales up after the move.
func addSecondMachine(t *testing.T, ns string) {
	t.Helper()
	create(t, target, newMachine(get(t, target, "Cluster", ns, clusterName), secondName))
}

// lockStep is one Lock call in the target and what it must return.
type lockStep struct {
	machine   string
	acquired  bool
	holder    string
	action    string
	recreated bool
	// writes is the exact number of API writes the call makes.
	writes int
}

// lockInTarget clears the Cluster's report of an initialised control plane
// in the target (clearInitialized), creates cp-1 there (addSecondMachine),
// makes the Lock calls of steps in the target, in order, and checks that
// the lock is then held by holder (expectMovedLock).
func lockInTarget(t *testing.T, ns string, steps []lockStep, holder string) {
	t.Helper()
	clearInitialized(t, ns)
	addSecondMachine(t, ns)
	l := newTargetLocker(t)
	for _, s := range steps {
		res, writes := l.lock(t, ns, s.machine)
		if res.Acquired != s.acquired || res.Holder != s.holder || res.Action != s.action || res.Recreated != s.recreated {
			t.Errorf("%s: Lock = acquired %t, holder %s, action %s, recreated %t; want %t, %s, %s, %t",
				s.machine, res.Acquired, res.Holder, res.Action, res.Recreated, s.acquired, s.holder, s.action, s.recreated)
		}
		if writes != s.writes {
			t.Errorf("%s: Lock made %d writes, want %d", s.machine, writes, s.writes)
		}
	}
	expectMovedLock(t, ns, holder)
}
