//go:build real

package real_test

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/initlock/initlock/internal/kubeenv"
	"github.com/initlock/initlock/internal/kubeenv/stack"
	"github.com/initlock/initlock/internal/kubeenv/wire"
)

// withStatus restores the Clusters' status with them, as the page's every
// restore does: a Cluster initialised before the backup is so from the
// start.
const withStatus = "--status-include-resources=clusters.cluster.x-k8s.io"

// TestBackupRestore follows docs/backup-restore.md step by step, one
// subtest per kind of restore, with stock CABPK, initlock-manager (its
// lock guard and relinker, default flags) and the Velero plugin. After each
// step it runs kubectl initlock list and relinks and checks what the page
// says they show. Each Cluster's lock is held by its first control-plane
// Machine, which has its init data, on a control plane not initialised; once
// the Cluster is unpaused after the restore, a second control-plane Machine
// is refused the lock, and the lock ends owned by the live Cluster.
func TestBackupRestore(t *testing.T) {
	t.Run("new management cluster", restoreElsewhere)
	t.Run("over live objects", restoreOverLive)
	t.Run("one Cluster of a namespace", restoreOneCluster)
}

// restoreElsewhere: the namespace is backed up in the first management
// cluster and restored into the second one, where initlock is installed
// (kubernetes-sigs/cluster-api#7794). The Cluster is restored paused, its
// lock unowned; once it is unpaused the manager adopts the lock and the
// relinker links what the Cluster owns.
func restoreElsewhere(t *testing.T) {
	ctx := t.Context()
	start := time.Now()
	const cluster, cp0 = "alpha", "alpha-cp-0"
	ns := heldNamespace(t, cluster)
	// The old management cluster's Clusters stay paused; resumed here so
	// that the namespace can go when the test ends.
	t.Cleanup(func() { _ = source.SetPaused(context.WithoutCancel(ctx), ns, cluster, false) })

	setPaused(t, source, ns, cluster, true)
	look(t, source, ns, "the pause").wantLock(t, "the pause", cluster, healthy(cp0))
	v := startVelero(t, source, true)
	backup := backupNamespace(t, v, ns)
	source.StopVelero()

	cleanupNamespace(t, target, ns)
	startManager(t, target)
	v = startVelero(t, target, true)
	synced := time.Now()
	must(t, v.WaitBackupSynced(ctx, backup))
	sync := time.Since(synced)
	restore, _ := restoreBackup(t, v, backup, withStatus)
	took, _ := restoreTook(t, v, restore)
	target.StopVelero()
	after := look(t, target, ns, "the restore")
	after.wantLock(t, "the restore", cluster, map[string]string{"HOLDER": cp0, "HOLDER-EXISTS": "yes", "OWNER": "missing", "PROTECTION": "guarded", "VERDICT": "unowned"})
	for _, w := range after.waiting {
		if !strings.HasSuffix(w, " same-restore") {
			t.Errorf("after the restore, relinks shows %q; want every owner same-restore, waiting for the unpause", w)
		}
	}
	// What the Cluster owns waits for it; what it does not may be linked
	// already, its owner restored before the Cluster.
	for _, w := range []string{
		"configmap/alpha-lock cluster.cluster.x-k8s.io/alpha same-restore",
		"machine.cluster.x-k8s.io/alpha-cp-0 cluster.cluster.x-k8s.io/alpha same-restore",
		"secret/alpha-kubeconfig cluster.cluster.x-k8s.io/alpha same-restore",
	} {
		if !slices.Contains(after.waiting, w) {
			t.Errorf("after the restore, relinks does not show %q: %q", w, after.waiting)
		}
	}

	markProvisioned(t, target, ns, cluster, cp0)
	setPaused(t, target, ns, cluster, false)
	waitLinked(t, target, ns, cluster)
	final := look(t, target, ns, "the unpause")
	final.wantLock(t, "the unpause", cluster, healthy(cp0))
	final.wantWaiting(t, "the unpause")
	second := secondRefused(t, target, ns, cluster)
	result(t, "backed up in one management cluster, restored into another: the backup synced %s after the second Velero server was ready; the restore took %s, %d objects waited for the unpause to be relinked; %s; %s in all",
		sync.Round(time.Second), took, len(after.waiting), second, time.Since(start).Round(time.Second))
}

// restoreOverLive: a releaser stopped between its release mark and its
// delete of a held lock (the mark is written with a patch, the manager
// stopped so that it stays for the backup); a backup is taken with the
// mark; the manager, back, takes the mark off; the Cluster is paused and
// the backup restored over the live objects with
// --existing-resource-policy=update, which patches the live lock (the same
// UID): initlock's plugin takes the mark off the restored lock. Restored
// again by a Velero server without the plugin, the mark comes back on the
// live lock: a plain kubectl delete of the lock, as kubectl sends it, must
// be refused, and once the Cluster is unpaused the manager takes the mark
// off and CABPK grants no second Machine.
func restoreOverLive(t *testing.T) {
	ctx := t.Context()
	start := time.Now()
	const cluster, cp0 = "bravo", "bravo-cp-0"
	ns := heldNamespace(t, cluster)

	// The releaser, here the manager, stops after its mark; its release
	// began a minute ago.
	source.StopManager()
	cm, err := kubeenv.GetLock(ctx, source.Client, ns, cluster)
	must(t, err)
	uid := cm.UID
	mark := fmt.Sprintf(`{"metadata":{"annotations":{%q:%q,%q:%q}}}`, wire.ReleaseAnnotation, uid,
		wire.ReleaseStartedAnnotation, time.Now().Add(-time.Minute).UTC().Format(time.RFC3339))
	must(t, source.Client.Patch(ctx, cm, client.RawPatch(types.MergePatchType, []byte(mark))))
	marked := map[string]string{"HOLDER": cp0, "HOLDER-EXISTS": "yes", "OWNER": "ok", "PROTECTION": "releasable", "VERDICT": "healthy"}
	look(t, source, ns, "a release stopped after its mark").wantLock(t, "the stopped release", cluster, marked)

	setPaused(t, source, ns, cluster, true)
	v := startVelero(t, source, true)
	backup := backupNamespace(t, v, ns)
	setPaused(t, source, ns, cluster, false)

	startManager(t, source)
	waitLinked(t, source, ns, cluster)
	look(t, source, ns, "the manager took the mark off").wantLock(t, "the unmark", cluster, healthy(cp0))

	setPaused(t, source, ns, cluster, true)
	restore, _ := restoreBackup(t, v, backup, "--existing-resource-policy=update", withStatus)
	took, _ := restoreTook(t, v, restore)
	source.StopVelero()
	wantLive(t, ns, cluster, uid, false)
	after := look(t, source, ns, "the restore")
	after.wantLock(t, "the restore", cluster, healthy(cp0))
	for _, w := range after.waiting {
		if !strings.HasSuffix(w, " linked") {
			t.Errorf("after the restore, relinks shows %q; want every owner linked, the annotation left until the unpause", w)
		}
	}
	if !slices.Contains(after.waiting, "configmap/bravo-lock cluster.cluster.x-k8s.io/bravo linked") {
		t.Errorf("after the restore, relinks does not show the lock: %q", after.waiting)
	}

	// The same restore by a Velero server without initlock's plugin writes
	// the mark back on the live lock.
	v = startVelero(t, source, false)
	restoreBackup(t, v, backup, "--existing-resource-policy=update", withStatus)
	source.StopVelero()
	wantLive(t, ns, cluster, uid, true)
	replayed := look(t, source, ns, "the restore without the plugin")
	replayed.wantLock(t, "the restore without the plugin", cluster, marked)
	replayed.wantWaiting(t, "the restore without the plugin")

	answer := "refused"
	if err := plainDelete(t, source, ns, cluster); err == nil {
		answer = "let through: the lock was deleted"
		t.Errorf("the lock guard let a plain kubectl delete of the held lock through, its release mark brought back by the restore; want it refused")
	}
	setPaused(t, source, ns, cluster, false)
	if answer == "refused" {
		waitLinked(t, source, ns, cluster)
		final := look(t, source, ns, "the unpause")
		final.wantLock(t, "the unpause", cluster, healthy(cp0))
		final.wantWaiting(t, "the unpause")
	}
	second := secondRefused(t, source, ns, cluster)
	result(t, "restored over live objects with --existing-resource-policy=update: the restore took %s, the plugin took the release mark off; restored again without the plugin, the mark came back, and a plain kubectl delete of the lock was %s; %s; %s in all",
		took, answer, second, time.Since(start).Round(time.Second))
}

// restoreOneCluster: a namespace with two Clusters is backed up; one of
// them is deleted by mistake and restored alone, first with
// --selector cluster.x-k8s.io/cluster-name=<cluster>, which leaves out the
// Cluster and its infrastructure objects (they do not carry the label): the
// lock is an orphan whose holder exists, kept, and what the Cluster owns
// waits for it. Then with --include-resources naming those kinds, which
// brings them back and skips the other Cluster's, which exist: the relinker
// does not link to a Cluster another restore created; once it is unpaused
// the manager adopts the lock and core the Machine, and the kubeconfig
// Secret, which nothing adopts, is linked by hand as the page says. The
// other Cluster's lock is never written.
func restoreOneCluster(t *testing.T) {
	ctx := t.Context()
	start := time.Now()
	const lost, cp0, kept = "charlie", "charlie-cp-0", "delta"
	ns := heldNamespace(t, lost, kept)
	keptLock, err := kubeenv.GetLock(ctx, source.Client, ns, kept)
	must(t, err)

	for _, c := range []string{lost, kept} {
		setPaused(t, source, ns, c, true)
	}
	v := startVelero(t, source, true)
	backup := backupNamespace(t, v, ns)
	for _, c := range []string{lost, kept} {
		setPaused(t, source, ns, c, false)
	}

	t.Logf("$ kubectl delete cluster %s -n %s", lost, ns)
	must(t, source.DeleteCluster(ctx, ns, lost))
	eventually(t, time.Minute, gone(source, ns, lost))

	partial, _ := restoreBackup(t, v, backup, "--selector", wire.ClusterNameLabel+"="+lost, withStatus)
	tookPartial, _ := restoreTook(t, v, partial)
	waitLinkedWhatIsThere(t, source, ns)
	orphan := look(t, source, ns, "the restore of the labelled objects")
	orphan.wantLock(t, "the labelled objects", lost, map[string]string{"HOLDER": cp0, "HOLDER-EXISTS": "yes", "OWNER": "missing", "PROTECTION": "guarded", "INITIALIZED": "-", "VERDICT": "orphan"})
	orphan.wantLock(t, "the labelled objects", kept, healthy("delta-cp-0"))
	orphan.wantWaiting(t, "the labelled objects",
		"configmap/charlie-lock cluster.cluster.x-k8s.io/charlie not-found",
		"machine.cluster.x-k8s.io/charlie-cp-0 cluster.cluster.x-k8s.io/charlie not-found",
		"secret/charlie-kubeconfig cluster.cluster.x-k8s.io/charlie not-found")

	rest, _ := restoreBackup(t, v, backup, "--include-resources",
		"clusters.cluster.x-k8s.io,localclusters."+stack.InfraGroup+",localmachines."+stack.InfraGroup, withStatus)
	tookRest, warnings := restoreTook(t, v, rest)
	source.StopVelero()
	paused := look(t, source, ns, "the restore of the Cluster")
	paused.wantLock(t, "the Cluster", lost, map[string]string{"HOLDER": cp0, "HOLDER-EXISTS": "yes", "OWNER": "missing", "PROTECTION": "guarded", "INITIALIZED": "no", "VERDICT": "unowned"})
	paused.wantWaiting(t, "the Cluster",
		"configmap/charlie-lock cluster.cluster.x-k8s.io/charlie unproven",
		"machine.cluster.x-k8s.io/charlie-cp-0 cluster.cluster.x-k8s.io/charlie unproven",
		"secret/charlie-kubeconfig cluster.cluster.x-k8s.io/charlie unproven")

	markProvisioned(t, source, ns, lost, cp0)
	setPaused(t, source, ns, lost, false)
	// The manager adopts the lock and core the Machine; nothing adopts the
	// kubeconfig Secret, which core only creates when it is missing.
	kubeconfig := "secret/" + lost + "-kubeconfig"
	eventually(t, time.Minute, func(ctx context.Context) error {
		if err := lockOwned(ctx, source, ns, lost); err != nil {
			return err
		}
		p, err := pending(ctx, source, ns)
		if err != nil {
			return err
		}
		if len(p) != 1 || "secret/"+p[0].Name != kubeconfig {
			return fmt.Errorf("%d restored objects wait for the relinker, want %s alone", len(p), kubeconfig)
		}
		return nil
	})
	adopted := look(t, source, ns, "the unpause")
	adopted.wantLock(t, "the unpause", lost, healthy(cp0))
	adopted.wantWaiting(t, "the unpause", kubeconfig+" cluster.cluster.x-k8s.io/charlie unproven")
	linkByHand(t, source, ns, lost+"-kubeconfig", lost)
	waitLinked(t, source, ns, lost)
	final := look(t, source, ns, "the Secret was linked by hand")
	final.wantLock(t, "the link", lost, healthy(cp0))
	final.wantLock(t, "the link", kept, healthy("delta-cp-0"))
	final.wantWaiting(t, "the link")
	second := secondRefused(t, source, ns, lost)

	now, err := kubeenv.GetLock(ctx, source.Client, ns, kept)
	must(t, err)
	if now == nil || now.UID != keptLock.UID || now.ResourceVersion != keptLock.ResourceVersion {
		t.Errorf("the lock of %s, left out of both restores, changed: %v, was %s at %s", kept, now, keptLock.UID, keptLock.ResourceVersion)
	}
	if err := lockOwned(ctx, source, ns, kept); err != nil {
		t.Error(err)
	}
	result(t, "one Cluster of a namespace restored with --selector, then its Cluster and infrastructure with --include-resources: the restores took %s and %s (%d warnings: the other Cluster's objects exist); %s; the other Cluster's lock untouched; %s in all",
		tookPartial, tookRest, warnings, second, time.Since(start).Round(time.Second))
}
