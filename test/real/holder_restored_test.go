//go:build real

package real_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/initlock/initlock/internal/cli"
	"github.com/initlock/initlock/internal/kubeenv"
	"github.com/initlock/initlock/internal/kubeenv/stack"
	"github.com/initlock/initlock/internal/kubeenv/wire"
)

const (
	// aloneGrace is initlock-manager's --orphan-grace in
	// TestHolderRestoredAlone: the lock and its Cluster are older than
	// that when the holder comes back.
	aloneGrace = 3 * time.Second
	// aloneWatch is how long the lock is watched once the Cluster is
	// unpaused after the restore: longer than the grace period and than
	// CABPK's 30 s requeue of a Machine refused the lock.
	aloneWatch = 40 * time.Second
)

// TestHolderRestoredAlone: the Machine that holds a Cluster's init lock is
// deleted by mistake after a backup and restored from it alone, while the
// Cluster, the lock and a second control-plane Machine waiting for the lock
// stay. CABPK is built from docs/cabpk.patch with its gate on: the lock's
// record and the Cluster's grant register name the holder by its UID and
// the Cluster's. The restored holder has a new UID while the Cluster keeps
// its own, so the record no longer names it by UID. initlock-manager runs
// with a grace period of a few seconds, and Velero with initlock's plugin.
//
// Cluster API deletes the holder's KubeadmConfig and LocalMachine before it
// lets the Machine go, and the garbage collector then deletes the Secrets
// the KubeadmConfig owns: the holder's bootstrap data, and the Cluster's
// certificates, which CABPK made for the Machine that runs init. The
// restore takes the Cluster's Machines and Secrets from the backup, and
// Velero skips those that exist: the holder comes back under a new UID,
// naming its bootstrap data, with its Secrets, and without its
// KubeadmConfig, so CABPK does not take the lock over for it and the record
// keeps the UID it was written with.
//
// From the delete to the restore the holder is gone, and whoever sees it
// gone rightly lets its lock go: the manager is stopped for that time, and
// the Cluster is paused from the moment the Machine is gone (Cluster API
// deletes no Machine of a paused Cluster) until after the restore, so that
// CABPK gives the waiting Machine nothing either.
//
// The Cluster unpaused and the manager started again, for aloneWatch: the
// lock stays with the holder, its record and the grant register as CABPK
// wrote them; the waiting Machine gets no bootstrap data; the manager writes
// nothing to the lock; and kubectl initlock release without --force refuses,
// naming the holder. While a Machine of the holder's name exists, whatever
// its UID, nobody else gets the lock and only --force releases it.
func TestHolderRestoredAlone(t *testing.T) {
	ctx := t.Context()
	m := startMgmt(t, stack.Options{Name: "restored-alone", S3: s3, CABPK: cabpkBinary(t, "INITLOCK_CABPK_INITLOCK", "docs/cabpk.patch"),
		CABPKArgs: []string{"--feature-gates=KubeadmBootstrapRestoreSafeInitLock=true"}})
	grace := "--orphan-grace=" + aloneGrace.String()
	startManager(t, m, grace)
	const cluster, cp0, cp1 = "alone", "alone-cp-0", "alone-cp-1"
	ns := m.Env.Namespace(t)
	_, err := createHeld(ctx, m, ns, cluster, cp0, hasInitData(m, ns, cp0))
	must(t, err)
	eventually(t, time.Minute, machineHasData(m, ns, cp0))
	holder, err := m.Get(ctx, stack.MachineGVK, ns, cp0)
	must(t, err)
	c, err := m.Get(ctx, stack.ClusterGVK, ns, cluster)
	must(t, err)
	// The lock and the grant are written in parallel: the lock may be
	// seen first.
	asWritten := func(ctx context.Context) error {
		return namedByUID(ctx, m, ns, cluster, cp0, holder.GetUID(), c.GetUID())
	}
	eventually(t, 10*time.Second, asWritten)
	if granted, after := addSecondMachine(t, m, ns, cluster, cp1); granted {
		t.Fatalf("CABPK granted %s the lock %s after it was created, while %s held it", cp1, after.Round(time.Millisecond), cp0)
	}

	setPaused(t, m, ns, cluster, true)
	v := startVelero(t, m, true)
	backup := backupNamespace(t, v, ns)
	setPaused(t, m, ns, cluster, false)

	m.StopManager()
	before := keys(snapshot(t, m, ns))
	t.Logf("$ kubectl delete machine %s -n %s", cp0, ns)
	must(t, m.Client.Delete(ctx, holder))
	eventually(t, time.Minute, machineGone(m, ns, cp0))
	setPaused(t, m, ns, cluster, true)
	data, _, _ := unstructured.NestedString(holder.Object, "spec", "bootstrap", "dataSecretName")
	eventually(t, time.Minute, func(ctx context.Context) error {
		err := m.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: data}, &corev1.Secret{})
		if err == nil {
			return fmt.Errorf("the bootstrap data %s of %s is still there", data, cp0)
		}
		return client.IgnoreNotFound(err)
	})
	after := keys(snapshot(t, m, ns))
	went := missingFrom(before, after)
	t.Logf("gone with %s: %s", cp0, strings.Join(went, " "))
	if err := asWritten(ctx); err != nil {
		t.Fatalf("while %s was gone, before the restore: %v", cp0, err)
	}

	_, done := restoreBackup(t, v, backup, "--include-resources", "machines.cluster.x-k8s.io,secrets",
		"--selector", wire.ClusterNameLabel+"="+cluster)
	m.StopVelero()
	back := missingFrom(keys(snapshot(t, m, ns)), after)
	t.Logf("restored: %s", strings.Join(back, " "))
	restored, err := m.Get(ctx, stack.MachineGVK, ns, cp0)
	must(t, err)
	if restored == nil || restored.GetUID() == holder.GetUID() {
		t.Fatalf("want %s restored under a new UID (it had %s); got %v", cp0, holder.GetUID(), restored)
	}
	must(t, machineHasData(m, ns, cp0)(ctx))
	s := &corev1.Secret{}
	must(t, m.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: data}, s))
	if !strings.Contains(string(s.Data["value"]), "kubeadm init") {
		t.Fatalf("the restored bootstrap data %s of %s holds no init data", data, cp0)
	}
	if slices.Contains(back, "KubeadmConfig/"+cp0) {
		t.Fatalf("the restore brought back the KubeadmConfig of %s; want the Machine without it", cp0)
	}

	startManager(t, m, grace)
	started := time.Now()
	setPaused(t, m, ns, cluster, false)
	kubeenv.Consistently(t, aloneWatch, func() error {
		if err := asWritten(ctx); err != nil {
			return err
		}
		if machineHasData(m, ns, cp1)(ctx) == nil {
			return fmt.Errorf("%s names bootstrap data while %s, restored, holds the lock", cp1, cp0)
		}
		if d, err := m.BootstrapData(ctx, ns, cp1); err != nil || d != "" {
			return errors.Join(fmt.Errorf("CABPK generated bootstrap data for %s while %s, restored, holds the lock", cp1, cp0), err)
		}
		return nil
	})
	look(t, m, ns, "the wait").wantLock(t, "the wait", cluster, healthy(cp0))
	var lockWrites []stack.Write
	for _, w := range writesTo(t, m, ns, cluster+wire.LockSuffix) {
		if !w.At.Before(done) {
			lockWrites = append(lockWrites, w)
			if w.Resource == userManager {
				t.Errorf("initlock-manager wrote the lock after the restore: %s at %s (%d)", w.Verb, w.At.Format(time.RFC3339Nano), w.Code)
			}
		}
	}

	printed, code := initlockExit(t, m, "release", cluster, "-n", ns, "--yes")
	refusal := fmt.Sprintf("configmap %q: refusing to release: machine %q holds it", cluster+wire.LockSuffix, cp0)
	if code != cli.ExitError || !strings.Contains(printed, refusal) {
		t.Errorf("kubectl initlock release without --force: exit code %d, printed %q; want exit code %d and %q", code, printed, cli.ExitError, refusal)
	}
	must(t, asWritten(ctx))
	result(t, "%s deleted by mistake (%s went with it) and restored alone, under a new UID, with %s: for %s after the unpause (manager started again with --orphan-grace=%s) the lock stayed with it, its record naming the old UID, %s got no bootstrap data, the lock's writes since the restore: %q (manager since its start: %q); release without --force refused, exit code %d",
		cp0, strings.Join(went, " "), strings.Join(back, " "), aloneWatch, aloneGrace, cp1,
		describeWrites(lockWrites), describeWrites(writesBy(t, m, userManager, ns, started)), code)
}

// namedByUID checks that cluster's lock exists, not being deleted, and that
// its record and the Cluster's grant register name machine by UID uid, of
// the Cluster of UID clusterUID.
func namedByUID(ctx context.Context, m *stack.Mgmt, ns, cluster, machine string, uid, clusterUID types.UID) error {
	cm, err := kubeenv.GetLock(ctx, m.Client, ns, cluster)
	if err != nil {
		return err
	}
	switch {
	case cm == nil:
		return errors.New("the lock is gone")
	case cm.DeletionTimestamp != nil:
		return errors.New("the lock is being deleted")
	}
	rec, err := wire.DecodeRecord(cm.Data[wire.DataKey])
	if err != nil {
		return err
	}
	want := wire.Ref{MachineName: machine, MachineUID: uid, ClusterUID: clusterUID}
	if rec.Ref != want {
		return fmt.Errorf("the lock's record names %+v, want %+v", rec.Ref, want)
	}
	c, err := m.Get(ctx, stack.ClusterGVK, ns, cluster)
	if err != nil || c == nil {
		return errors.Join(fmt.Errorf("no Cluster %s", cluster), err)
	}
	if g := wire.GrantFrom(c.GetAnnotations()); g == nil || g.Ref != want {
		return fmt.Errorf("the grant register holds %q, want a grant to %+v", g.Raw(), want)
	}
	return nil
}

// missingFrom lists the keys of a that b lacks.
func missingFrom(a, b []string) []string {
	return slices.DeleteFunc(slices.Clone(a), func(k string) bool { return slices.Contains(b, k) })
}
