//go:build real

package real_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/initlock/initlock/internal/kubeenv"
	"github.com/initlock/initlock/internal/kubeenv/stack"
	"github.com/initlock/initlock/internal/kubeenv/wire"
)

// TestSeedWithPatchedCABPK runs the seed's story with CABPK built from
// docs/cabpk.patch, its feature gate KubeadmBootstrapRestoreSafeInitLock
// on, and neither initlock-manager nor initlock's Velero plugin: CABPK
// takes the lock through pkg/initlock/locking (the lock record carries
// UIDs and a token, and the Cluster's grant register names the Machine),
// and after a real Velero backup, the loss of the namespace
// and its restore, CABPK itself re-adopts the lock the restore left
// without an owner, so that deleting the Cluster deletes it.
func TestSeedWithPatchedCABPK(t *testing.T) {
	bin := os.Getenv("INITLOCK_CABPK_INITLOCK")
	if bin == "" {
		t.Fatal("$INITLOCK_CABPK_INITLOCK is not set: run the suite with 'make test-real', which builds CABPK with docs/cabpk.patch (hack/cabpk-initlock.sh)")
	}
	bins, err := stack.FindBinaries()
	must(t, err)
	ctx := t.Context()
	m, err := stack.StartMgmt(ctx, bins, stack.Options{Name: "patched", S3: s3, CABPK: bin,
		// The patch puts initlock's mutex behind this gate, off by default.
		CABPKArgs: []string{"--feature-gates=KubeadmBootstrapRestoreSafeInitLock=true"}})
	must(t, err)
	t.Cleanup(func() {
		if err := m.Stop(); err != nil {
			t.Error(err)
		}
	})
	ns := m.Env.Namespace(t)
	must(t, m.CreateCluster(ctx, ns, seedCluster, stack.ClusterOptions{}))
	must(t, m.CreateMachine(ctx, ns, seedCluster, seedMachine, true))
	cm := waitLockHeld(t, m, ns, seedCluster, seedMachine)
	if rec, err := wire.DecodeRecord(cm.Data[wire.DataKey]); err != nil || rec.MachineUID == "" || rec.Token == "" {
		t.Errorf("the lock record %q is in the upstream format: CABPK did not take it through initlock", cm.Data[wire.DataKey])
	}
	// The lock and the grant are written in parallel: the lock may be
	// seen first.
	eventually(t, 10*time.Second, func(ctx context.Context) error {
		cluster, err := m.Get(ctx, stack.ClusterGVK, ns, seedCluster)
		if err != nil {
			return err
		}
		if g := wire.GrantFrom(cluster.GetAnnotations()); !g.Held() || g.MachineName != seedMachine {
			return fmt.Errorf("the grant register holds %q, want a grant to %s", g.Raw(), seedMachine)
		}
		return nil
	})
	// The Machine names its bootstrap data before the backup: after the
	// restore CABPK takes the branch that restores its status, where the
	// patch re-takes the lock.
	eventually(t, 60*time.Second, func(ctx context.Context) error {
		machine, err := m.Get(ctx, stack.MachineGVK, ns, seedMachine)
		if err != nil {
			return err
		}
		if s, _, _ := unstructured.NestedString(machine.Object, "spec", "bootstrap", "dataSecretName"); s == "" {
			return errors.New("the Machine does not name its bootstrap data yet")
		}
		return nil
	})
	must(t, m.SetPaused(ctx, ns, seedCluster, true))
	waitPaused(t, m, ns, seedCluster)
	v, err := m.StartVelero(ctx, false)
	must(t, err)
	backup := backupNamespace(t, v, ns)
	m.StopVelero()

	must(t, m.SetPaused(ctx, ns, seedCluster, false))
	deleteNamespace(t, m, ns)
	v, err = m.StartVelero(ctx, false)
	must(t, err)
	_, done := restoreBackup(t, v, backup)
	m.StopVelero()
	cm, err = kubeenv.GetLock(ctx, m.Client, ns, seedCluster)
	must(t, err)
	if cm == nil || len(cm.OwnerReferences) != 0 {
		t.Fatalf("the restored lock is %v; the restore should have brought it back without an owner", cm)
	}
	must(t, m.SetPaused(ctx, ns, seedCluster, false))
	// Velero drops status: the infrastructure provider marks its restored
	// objects provisioned again, as it does after any restore.
	must(t, m.MarkProvisioned(ctx, stack.LocalClusterGVK, ns, seedCluster))
	must(t, m.MarkProvisioned(ctx, stack.LocalMachineGVK, ns, seedMachine))
	eventually(t, 60*time.Second, func(ctx context.Context) error { return lockOwned(ctx, m, ns, seedCluster) })
	healed := time.Since(done)
	var lockWrites []stack.Write
	for _, w := range writesBy(t, m, userCABPK, ns, done) {
		if w.Resource == "configmaps" && w.Name == seedCluster+"-lock" && w.Code < 300 {
			lockWrites = append(lockWrites, w)
		}
	}
	if len(lockWrites) == 0 {
		t.Errorf("the audit log shows no write of CABPK to the lock since the restore; who re-adopted it?")
	}
	if ws := writesBy(t, m, userManager, ns, time.Time{}); len(ws) > 0 {
		t.Errorf("initlock-manager wrote in the namespace: %s", describeWrites(ws))
	}

	deleteCluster(t, m, ns, seedCluster)
	eventually(t, 60*time.Second, func(ctx context.Context) error {
		cm, err := kubeenv.GetLock(ctx, m.Client, ns, seedCluster)
		if err != nil {
			return err
		}
		if cm != nil {
			return fmt.Errorf("the lock outlived its Cluster")
		}
		return nil
	})
	result(t, "CABPK with docs/cabpk.patch: grant register written at the first lock; after the restore the lock came back unowned and CABPK re-adopted it %s after the restore (%s), no manager; the garbage collector deleted it with the Cluster",
		healed.Round(time.Millisecond), describeWrites(lockWrites))
}
