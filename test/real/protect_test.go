//go:build real

package real_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/util/uuid"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/initlock/initlock/internal/kubeenv"
	"github.com/initlock/initlock/internal/kubeenv/stack"
	"github.com/initlock/initlock/internal/kubeenv/wire"
)

// heldOutcome is what a delete of a held lock came to.
type heldOutcome struct {
	mode string
	// answer is what the API server answered the delete (operator) or the
	// patch that made the owner stale.
	answer string
	// refused counts the deletes of the lock the API server refused.
	refused int
	// afterDelete tells what became of the lock 2 s after the delete.
	afterDelete string
	// secondInit tells whether the second control-plane Machine got init
	// data while the first existed.
	secondInit, firstExisted bool
	initAfter                time.Duration
	lockHolder               string
}

func (o heldOutcome) String() string {
	s := fmt.Sprintf("%s: the delete was answered %s; deletes refused: %d; after it the lock %s; ", o.mode, o.answer, o.refused, o.afterDelete)
	if o.secondInit {
		s += fmt.Sprintf("cp-1 got init data %s after it was created, while cp-0 existed: %t", o.initAfter.Round(time.Millisecond), o.firstExisted)
	} else {
		s += "cp-1 was refused the lock"
	}
	return s + fmt.Sprintf("; lock holder at the end: %q", o.lockHolder)
}

// deleteHow deletes cluster's held lock in namespace ns, one way, and
// returns the API server's answer to its request.
type deleteHow func(t *testing.T, ns, cluster string) error

// operatorDelete is `kubectl delete configmap <cluster>-lock`.
func operatorDelete(t *testing.T, ns, cluster string) error {
	cm := &corev1.ConfigMap{}
	cm.Namespace, cm.Name = ns, cluster+wire.LockSuffix
	return source.Client.Delete(t.Context(), cm)
}

// staleOwner leaves the lock owned by a Cluster UID that no longer exists,
// as a restore or a copy from an earlier incarnation of the Cluster does;
// the garbage collector then deletes it.
func staleOwner(t *testing.T, ns, cluster string) error {
	ctx := t.Context()
	cm, err := kubeenv.GetLock(ctx, source.Client, ns, cluster)
	if err != nil {
		return err
	}
	if cm == nil || len(cm.OwnerReferences) != 1 {
		return fmt.Errorf("lock of %s/%s: want one ownerReference, got %v", ns, cluster, cm)
	}
	next := cm.DeepCopy()
	next.OwnerReferences[0].UID = uuid.NewUUID()
	return source.Client.Patch(ctx, next, client.MergeFromWithOptions(cm, client.MergeFromWithOptimisticLock{}))
}

// staleOwnerManagerDown is staleOwner while initlock-manager is down (it
// would re-adopt the lock before the garbage collector acts): the lock
// guard alone stands between the collector and the lock. The manager is
// started again 2 s later.
func staleOwnerManagerDown(t *testing.T, ns, cluster string) error {
	if !source.ManagerRuns() {
		return staleOwner(t, ns, cluster)
	}
	source.StopManager()
	err := staleOwner(t, ns, cluster)
	time.Sleep(2 * time.Second)
	startManager(t, source)
	return err
}

// startHeld creates, in a new namespace, a Cluster whose lock CABPK has
// given to <cluster>-cp-0, which has its init data and the name of its
// data Secret in its spec; with initlock installed first (startManager)
// when withInitlock. It returns the namespace and the run's name.
func startHeld(t *testing.T, withInitlock bool, cluster string) (ns, mode string) {
	t.Helper()
	ns, mode = source.Env.Namespace(t), "upstream"
	if withInitlock {
		mode = "with initlock-manager and its lock guard"
		startManager(t, source)
	}
	holdLock(t, source, ns, cluster)
	return ns, mode
}

// holdLock creates, in namespace ns of m, a Cluster whose lock CABPK has
// given to <cluster>-cp-0, which has its init data and the name of its data
// Secret in its spec.
func holdLock(t *testing.T, m *stack.Mgmt, ns, cluster string) {
	t.Helper()
	ctx := t.Context()
	cp0 := cluster + "-cp-0"
	_, err := createHeld(ctx, m, ns, cluster, cp0, hasInitData(m, ns, cp0))
	must(t, err)
	eventually(t, time.Minute, machineHasData(m, ns, cp0))
	// Core writes the Cluster's kubeconfig Secret on its own schedule; the
	// scenarios back it up with the rest, so it must be there first.
	eventually(t, time.Minute, func(ctx context.Context) error {
		return m.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: cluster + "-kubeconfig"}, &corev1.Secret{})
	})
}

// lockState tells what became of cluster's lock in ns: gone, terminating,
// or there.
func lockState(t *testing.T, ns, cluster string) string {
	t.Helper()
	cm, err := kubeenv.GetLock(t.Context(), source.Client, ns, cluster)
	must(t, err)
	switch {
	case cm == nil:
		return "was gone"
	case cm.DeletionTimestamp != nil:
		return "was terminating"
	}
	return "was there, not terminating"
}

// runHeldDelete: CABPK takes the lock for cp-0 and generates its init data
// (cp-0 is initialising: nothing marks the control plane initialised); the
// lock is deleted by del; then a second control-plane Machine cp-1 is
// added.
func runHeldDelete(t *testing.T, withInitlock bool, del deleteHow) heldOutcome {
	ctx := t.Context()
	const cluster, cp0, cp1 = "held", "held-cp-0", "held-cp-1"
	ns, mode := startHeld(t, withInitlock, cluster)
	o := heldOutcome{mode: mode}
	o.answer = answer(t, del(t, ns, cluster))
	time.Sleep(2 * time.Second)
	o.afterDelete = lockState(t, ns, cluster)

	o.secondInit, o.initAfter = addSecondMachine(t, source, ns, cluster, cp1)
	o.firstExisted = o.secondInit && machineExists(t, source, ns, cp0)
	cm, err := kubeenv.GetLock(ctx, source.Client, ns, cluster)
	must(t, err)
	if cm != nil {
		rec, _ := wire.DecodeRecord(cm.Data[wire.DataKey])
		o.lockHolder = rec.MachineName
	}
	o.refused = guardRefusals(t, source, "", ns, cluster+wire.LockSuffix)
	if withInitlock {
		managerDown(t, ns, cluster)
	}
	return o
}

// managerDown: with the manager stopped (its lock guard still installed),
// the Cluster is deleted, and with it its Machines: nothing holds the
// Cluster back. The lock stays, not terminating (the garbage collector's
// delete is refused), until the command the guard's refusal names lets it
// go.
func managerDown(t *testing.T, ns, cluster string) {
	ctx := t.Context()
	source.StopManager()
	start := time.Now()
	must(t, source.DeleteCluster(ctx, ns, cluster))
	deleted := time.Since(start)
	time.Sleep(2 * time.Second)
	cm, err := kubeenv.GetLock(ctx, source.Client, ns, cluster)
	must(t, err)
	if cm == nil || cm.DeletionTimestamp != nil {
		t.Fatalf("with the manager down, the lock of the deleted Cluster %s/%s: want it there, not terminating; got %v", ns, cluster, cm)
	}
	initlockCLI(t, source, "release", cluster, "-n", ns, "--force", "--yes")
	eventually(t, 10*time.Second, lockGone(source, ns, cluster))
	result(t, "manager down, guard installed: the Cluster was deleted in %s; its lock stayed, not terminating, the garbage collector's deletes refused (%d); "+
		"'kubectl initlock release %s -n <ns> --force' released it", deleted.Round(time.Millisecond), guardRefusals(t, source, userGC, ns, cluster+wire.LockSuffix), cluster)
}

// answer names the API server's answer to a delete of a lock: "OK", or
// "Forbidden" and what the refusal tells an operator to run. Any other
// error fails t.
func answer(t *testing.T, err error) string {
	t.Helper()
	switch {
	case err == nil:
		return "OK"
	case !apierrors.IsForbidden(err):
		t.Fatal(err)
	case strings.Contains(err.Error(), "kubectl initlock release") && strings.Contains(err.Error(), "--force"):
		return "Forbidden, naming kubectl initlock release --force"
	}
	return "Forbidden: " + err.Error()
}

// TestHeldLockDeleted: a held lock deleted while its holder cp-0 is still
// initialising, by an operator and by the garbage collector (a stale owner
// UID, with the manager up and down), with CABPK unmodified: upstream alone
// lets cp-1 run init as well; with initlock's lock guard the delete is
// refused from the lock's first instant, the lock stays as it was (never
// terminating), and cp-1 is refused.
func TestHeldLockDeleted(t *testing.T) {
	for _, tc := range []struct {
		name     string
		del      deleteHow
		operator bool
	}{
		{"operator deletes the lock", operatorDelete, true},
		{"lock owned by a stale Cluster UID, collected", staleOwner, false},
		{"lock owned by a stale Cluster UID while the manager is down", staleOwnerManagerDown, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			up := runHeldDelete(t, false, tc.del)
			with := runHeldDelete(t, true, tc.del)
			result(t, "held lock deleted (%s): %s; %s", tc.name, up, with)
			if !up.secondInit || !up.firstExisted {
				t.Errorf("upstream: want cp-1 granted while cp-0 exists (the defect the guard closes): %s", up)
			}
			if with.secondInit {
				t.Errorf("with initlock, cp-1 got init data while cp-0 existed: %s", with)
			}
			if with.lockHolder != "held-cp-0" || with.afterDelete != "was there, not terminating" {
				t.Errorf("with initlock, want the lock kept for held-cp-0, not terminating: %s", with)
			}
			if tc.operator && with.answer != "Forbidden, naming kubectl initlock release --force" {
				t.Errorf("with initlock, the operator's delete was answered %q; want a refusal naming kubectl initlock release", with.answer)
			}
		})
	}
}
