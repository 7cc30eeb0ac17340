//go:build real

package real_test

import (
	"context"
	"fmt"
	"slices"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/initlock/initlock/internal/kubeenv"
	"github.com/initlock/initlock/internal/kubeenv/stack"
	"github.com/initlock/initlock/internal/kubeenv/wire"
)

// heldBackOutcome is what a backup taken after a delete of a held lock
// came to, once restored.
type heldBackOutcome struct {
	mode string
	// answer is the API server's answer to the operator's delete.
	answer string
	// lockState is what became of the lock after the delete.
	lockState string
	// inBackup tells whether the backup holds the lock.
	inBackup bool
	// secondInit tells whether cp-1, added after the restore, got init
	// data, and whileFirst whether the restored cp-0 existed then.
	secondInit, whileFirst bool
	// lockHolder is what the restored lock names at the end.
	lockHolder string
}

func (o heldBackOutcome) String() string {
	return fmt.Sprintf("%s: the operator's delete was answered %q, the lock then %s; in the backup: %t; after the restore cp-1 got init data: %t, while cp-0 existed: %t; restored lock holder %q",
		o.mode, o.answer, o.lockState, o.inBackup, o.secondInit, o.whileFirst, o.lockHolder)
}

// heldBackFinalizer holds a lock's delete back in the upstream run, as a
// finalizer on the lock (initlock's own, before its lock guard) did.
const heldBackFinalizer = "example.com/hold"

// runHeldBackup: CABPK, unmodified, takes the lock for cp-0 and gives cp-0
// its init data; an operator deletes the lock; the real Velero server
// backs the namespace up; the backup is restored into a new namespace, the
// infrastructure provider reports its restored objects provisioned, and a
// second control-plane Machine cp-1 is added there. Upstream, the lock
// carries a finalizer that holds its delete back (as initlock's did): it
// is terminating, and Velero skips it. With initlock's lock guard the
// delete is refused and the lock stays as it was.
func runHeldBackup(t *testing.T, withInitlock bool) heldBackOutcome {
	ctx := t.Context()
	const cluster, cp0, cp1 = "kept", "kept-cp-0", "kept-cp-1"
	ns, mode := startHeld(t, withInitlock, cluster)
	o := heldBackOutcome{mode: mode}
	if !withInitlock {
		o.mode += ", the lock held back by a finalizer"
	}
	lock := &corev1.ConfigMap{}
	lock.Namespace, lock.Name = ns, cluster+wire.LockSuffix
	if !withInitlock {
		must(t, source.Client.Patch(ctx, lock, client.RawPatch(types.MergePatchType, []byte(`{"metadata":{"finalizers":["`+heldBackFinalizer+`"]}}`))))
		t.Cleanup(func() { removeFinalizers(context.WithoutCancel(t.Context()), source, ns, lock.Name) })
	}
	o.answer = answer(t, operatorDelete(t, ns, cluster))
	o.lockState = lockState(t, ns, cluster)

	v := startVelero(t, source, withInitlock)
	backup := backupNamespace(t, v, ns)
	o.inBackup = slices.ContainsFunc(downloadBackup(t, v, backup, ns), func(u *unstructured.Unstructured) bool {
		return u.GetKind() == "ConfigMap" && u.GetName() == lock.Name
	})
	restored := kubeenv.NamespaceName("kept-restored")
	cleanupNamespace(t, source, restored)
	restoreBackup(t, v, backup, "--namespace-mappings", ns+":"+restored)
	source.StopVelero()
	markProvisioned(t, source, restored, cluster, cp0)
	o.secondInit, _ = addSecondMachine(t, source, restored, cluster, cp1)
	o.whileFirst = o.secondInit && machineExists(t, source, restored, cp0)
	if cm, err := kubeenv.GetLock(ctx, source.Client, restored, cluster); err == nil && cm != nil {
		rec, _ := wire.DecodeRecord(cm.Data[wire.DataKey])
		o.lockHolder = rec.MachineName
	}
	return o
}

// TestHeldLockBackedUp: a held lock an operator tried to delete is in the
// backups taken afterwards. Upstream, with a finalizer holding the delete
// back, the lock is terminating, the real Velero server skips it, and after
// a restore CABPK grants cp-1 while cp-0 exists; with initlock's lock guard
// the delete is refused, the lock is never terminating, the backup holds
// it, and after the restore cp-1 is refused.
func TestHeldLockBackedUp(t *testing.T) {
	up := runHeldBackup(t, false)
	with := runHeldBackup(t, true)
	result(t, "held lock, deleted, then backed up with Velero %s and restored: %s; %s", stack.VeleroVersion, up, with)
	if up.lockState != "was terminating" || up.inBackup || !up.secondInit || !up.whileFirst {
		t.Errorf("upstream: want the held-back lock left out of the backup and cp-1 granted while cp-0 exists (the defect the guard closes): %s", up)
	}
	if with.lockState != "was there, not terminating" || !with.inBackup || with.secondInit || with.lockHolder != "kept-cp-0" {
		t.Errorf("with initlock: want the delete refused, the lock in the backup and cp-1 refused after the restore: %s", with)
	}
}
