//go:build real

package real_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/initlock/initlock/internal/kubeenv"
	"github.com/initlock/initlock/internal/kubeenv/stack"
	"github.com/initlock/initlock/internal/kubeenv/wire"
)

// patchedCABPK is CABPK built with one of the fixes of docs/: the binary's
// environment variable (make test-real sets it, hack/cabpk-initlock.sh),
// its command-line arguments, and whether it takes the lock through
// pkg/initlock (the lock record carries UIDs and a token, and the Cluster's
// grant register names the Machine) or with its own mutex (upstream's
// record).
type patchedCABPK struct {
	name, env, patch string
	args             []string
	initlock         bool
}

// TestSeedWithPatchedCABPK runs the seed's story with CABPK built from each
// fix of docs/ (the full patch, its feature gate KubeadmBootstrapRestoreSafeInitLock
// on; the minimal patch), and neither initlock-manager nor initlock's
// Velero plugin: after a real Velero backup, the loss of the namespace and
// its restore, CABPK itself re-adopts the lock the restore left without an
// owner, so that deleting the Cluster deletes it.
func TestSeedWithPatchedCABPK(t *testing.T) {
	for _, p := range []patchedCABPK{
		{name: "full", env: "INITLOCK_CABPK_INITLOCK", patch: "docs/cabpk.patch", initlock: true,
			// The patch puts initlock's mutex behind this gate, off by default.
			args: []string{"--feature-gates=KubeadmBootstrapRestoreSafeInitLock=true"}},
		{name: "minimal", env: "INITLOCK_CABPK_MINIMAL", patch: "docs/cabpk-minimal.patch"},
	} {
		t.Run(p.name, func(t *testing.T) { seedWithPatchedCABPK(t, p) })
	}
}

func seedWithPatchedCABPK(t *testing.T, p patchedCABPK) {
	ctx := t.Context()
	m := startMgmt(t, stack.Options{Name: "patched-" + p.name, S3: s3, CABPK: cabpkBinary(t, p.env, p.patch), CABPKArgs: p.args})
	ns := m.Env.Namespace(t)
	cm, err := createHeld(ctx, m, ns, seedCluster, seedMachine, nil)
	must(t, err)
	rec, err := wire.DecodeRecord(cm.Data[wire.DataKey])
	must(t, err)
	if through := rec.MachineUID != "" && rec.Token != ""; through != p.initlock {
		t.Errorf("the lock record %q: taken through initlock %t, want %t", cm.Data[wire.DataKey], through, p.initlock)
	}
	// The lock and the grant are written in parallel: the lock may be
	// seen first.
	eventually(t, 10*time.Second, func(ctx context.Context) error {
		if !p.initlock {
			return nil
		}
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
	eventually(t, 60*time.Second, machineHasData(m, ns, seedMachine))
	setPaused(t, m, ns, seedCluster, true)
	v := startVelero(t, m, false)
	backup := backupNamespace(t, v, ns)
	m.StopVelero()

	must(t, m.SetPaused(ctx, ns, seedCluster, false))
	must(t, m.DeleteNamespace(ctx, ns))
	v = startVelero(t, m, false)
	_, done := restoreBackup(t, v, backup)
	m.StopVelero()
	cm, err = kubeenv.GetLock(ctx, m.Client, ns, seedCluster)
	must(t, err)
	if cm == nil || len(cm.OwnerReferences) != 0 {
		t.Fatalf("the restored lock is %v; the restore should have brought it back without an owner", cm)
	}
	must(t, m.SetPaused(ctx, ns, seedCluster, false))
	markProvisioned(t, m, ns, seedCluster, seedMachine)
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

	must(t, m.DeleteCluster(ctx, ns, seedCluster))
	eventually(t, 60*time.Second, lockGone(m, ns, seedCluster))
	result(t, "CABPK with %s: after the restore the lock came back unowned and CABPK re-adopted it %s after the restore (%s), no manager; the garbage collector deleted it with the Cluster",
		p.patch, healed.Round(time.Millisecond), describeWrites(lockWrites))
}
