package managersuite_test

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/initlock/initlock/internal/kubeenv"
	"github.com/initlock/initlock/internal/kubeenv/wire"
	"github.com/initlock/initlock/pkg/initlock"
)

// TestHeldLockCannotBeDeleted: a lock held by an existing Machine of an
// uninitialised Cluster is held from the instant it exists, with the
// manager up or down: the lock guard refuses a person's delete, the
// garbage collector's (an ownerReference to a Cluster UID that does not
// exist, as a naive copy leaves it) and a provider's own release (CABPK
// deletes with no precondition after a failed generation of the init
// data). The lock stays as it was, never terminating. Once its holder is
// gone, the manager releases it: the release mark, then the delete.
func TestHeldLockCannotBeDeleted(t *testing.T) {
	ns := env.Namespace(t)
	cluster := createCluster(t, v, ns, "c1")
	m1 := createMachine(t, v, ns, "c1", "c1-cp-0")
	lock := lockFor(ns, "c1", "c1-cp-0", cluster)
	lock.OwnerReferences[0].UID = types.UID("00000000-0000-0000-0000-00000000dead") // a stale owner: the collector's
	create(t, lock)

	// The manager is down: the guard alone.
	err := env.Client.Delete(t.Context(), lock.DeepCopy())
	if !apierrors.IsForbidden(err) || !strings.Contains(err.Error(), "kubectl initlock release c1 -n "+ns+" --force") {
		t.Fatalf("delete of a held lock: %v; want a refusal naming kubectl initlock release --force", err)
	}
	kubeenv.Consistently(t, 3*time.Second, lockIs(t, ns, "c1", func(cm *corev1.ConfigMap) error { // the collector's turn
		if cm.DeletionTimestamp != nil || cm.ResourceVersion != lock.ResourceVersion {
			return fmt.Errorf("the held lock changed: deleting %v, resourceVersion %s", cm.DeletionTimestamp != nil, cm.ResourceVersion)
		}
		return nil
	}))

	// The manager adopts it, and leaves it held while its holder exists.
	opts := testOptions(ns)
	opts.OrphanGrace = 5 * time.Second // the lock is older than that once its holder goes
	rm := startManager(t, env.Config, opts)
	kubeenv.Eventually(t, 20*time.Second, lockIs(t, ns, "c1", ownedBy(cluster)))
	if err := env.Client.Delete(t.Context(), lock.DeepCopy()); !apierrors.IsForbidden(err) {
		t.Fatalf("delete of the adopted lock: %v, want forbidden", err)
	}
	kubeenv.Consistently(t, time.Second, lockIs(t, ns, "c1", present))
	wantWrites(t, rm, "configmaps", ns, 1, "(the adoption)")

	// The holder goes: the lock is released for the next Machine.
	releasedBefore := metricValue(t, "initlock_lock_releases_total", "reason=holder-gone")
	deleteAndWait(t, m1)
	kubeenv.Eventually(t, 20*time.Second, lockGone(t, ns, "c1"))
	eventOn(t, ns, "LockReleased", "Cluster", "c1")
	wantWrites(t, rm, "configmaps", ns, 3, "(adopt, the release mark, the delete)")
	if d := metricValue(t, "initlock_lock_releases_total", "reason=holder-gone") - releasedBefore; d != 1 {
		t.Fatalf("releases{reason=holder-gone} grew by %v, want 1", d)
	}
}

// TestFailedInitKeepsItsHolder: stock CABPK releases the lock when it cannot
// generate the holder's init data (a delete with no precondition). The
// guard refuses it: the lock keeps naming its holder, whose next attempt
// CABPK answers "acquired" (its lock names it), and no other Machine is
// granted it. The manager writes nothing to it.
func TestFailedInitKeepsItsHolder(t *testing.T) {
	ns := env.Namespace(t)
	cluster := createCluster(t, v, ns, "c1")
	createMachine(t, v, ns, "c1", "c1-cp-0")
	createMachine(t, v, ns, "c1", "c1-cp-1")
	lock := lockFor(ns, "c1", "c1-cp-0", cluster)
	create(t, lock)
	rm := startManager(t, env.Config, testOptions(ns))

	unlock := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: lock.Name}} // CABPK's Unlock: a delete by name
	if err := env.Client.Delete(t.Context(), unlock); !apierrors.IsForbidden(err) {
		t.Fatalf("CABPK's release after a failed generation: %v, want forbidden", err)
	}
	kubeenv.Consistently(t, 2*time.Second, lockIs(t, ns, "c1", holds("c1-cp-0")))
	wantWrites(t, rm, "configmaps", ns, 0, "")
}

var kubeadmConfigGVK = schema.GroupVersionKind{Group: "bootstrap.cluster.x-k8s.io", Version: "v1beta2", Kind: "KubeadmConfig"}

// TestLeftoverFailureHandsNothingOver: the holder's KubeadmConfig carries a
// DataSecretGenerationFailed condition left over from an earlier attempt
// while CABPK has just given it the lock (it has no bootstrap data yet). An
// operator deletes the lock; a provider using pkg/initlock asks for it for
// another Machine; the holder then gets its data. No second Machine is
// granted the lock, and the lock keeps naming its holder throughout: no
// rule of initlock's hands a lock from one Machine to another, or lets go
// a lock whose holder lives, on a bootstrap configuration's word.
func TestLeftoverFailureHandsNothingOver(t *testing.T) {
	ns := env.Namespace(t)
	cluster, m1, _, m2 := lockDeletedOverAFailedConfig(t, ns)
	time.Sleep(time.Second)
	for range 3 {
		res, err := initlock.New(env.Client).Lock(t.Context(), getCluster(t, cluster), m2)
		if err == nil && res.Acquired {
			t.Fatalf("c1-cp-1 was granted the lock while c1-cp-0, which CABPK granted it, exists")
		}
		time.Sleep(500 * time.Millisecond)
	}
	patch := []byte(`{"spec":{"bootstrap":{"dataSecretName":"c1-cp-0"}}}`) // c1-cp-0 gets its init data
	if err := env.Client.Patch(t.Context(), m1, client.RawPatch(types.MergePatchType, patch)); err != nil {
		t.Fatal(err)
	}
	kubeenv.Consistently(t, 3*time.Second, lockIs(t, ns, "c1", holds("c1-cp-0")))
}

// TestReportedDataLetsNothingGo: the holder's KubeadmConfig carries a
// DataSecretGenerationFailed condition left over from an earlier attempt;
// an operator deletes the lock; then the KubeadmConfig reports its data
// secret (DataSecretAvailable True) while the Machine has not picked it up
// yet. However long that lasts, the lock keeps naming its holder and no
// other Machine is granted it: initlock lets go of no lock on a bootstrap
// configuration's word.
func TestReportedDataLetsNothingGo(t *testing.T) {
	ns := env.Namespace(t)
	cluster, _, config, m2 := lockDeletedOverAFailedConfig(t, ns)
	config.Object["status"] = map[string]any{"dataSecretName": "c1-cp-0", "deprecated": map[string]any{"v1beta1": map[string]any{"conditions": []any{map[string]any{
		"type": "DataSecretAvailable", "status": "True", "lastTransitionTime": time.Now().UTC().Format(time.RFC3339),
	}}}}}
	if err := env.Client.Status().Update(t.Context(), config); err != nil {
		t.Fatal(err)
	}
	kubeenv.Consistently(t, 6*time.Second, lockIs(t, ns, "c1", holds("c1-cp-0")))
	res, err := initlock.New(env.Client).Lock(t.Context(), getCluster(t, cluster), m2)
	if err == nil && res.Acquired {
		t.Fatalf("c1-cp-1 was granted the lock while c1-cp-0, which CABPK granted it and which has its init data, exists")
	}
}

// lockDeletedOverAFailedConfig creates Cluster c1, its Machine c1-cp-0
// with no bootstrap data yet and a KubeadmConfig whose status reports a
// failed generation of the init data (as CABPK leaves it after a failed
// attempt), its Machine c1-cp-1, and the lock held by c1-cp-0 as CABPK
// writes it; starts a manager; and deletes the lock as an operator does
// (kubectl delete configmap c1-lock), a second after the manager has seen
// it and a second before it returns the Cluster, c1-cp-0, its KubeadmConfig
// and c1-cp-1.
func lockDeletedOverAFailedConfig(t *testing.T, ns string) (cluster, m1, config, m2 *unstructured.Unstructured) {
	t.Helper()
	cluster = createCluster(t, v, ns, "c1")
	config = &unstructured.Unstructured{}
	config.SetGroupVersionKind(kubeadmConfigGVK)
	config.SetNamespace(ns)
	config.SetName("c1-cp-0")
	config.Object["spec"] = map[string]any{"format": "cloud-config"}
	create(t, config)
	config.Object["status"] = map[string]any{"deprecated": map[string]any{"v1beta1": map[string]any{"conditions": []any{map[string]any{
		"type": "DataSecretAvailable", "status": "False", "severity": "Warning", "reason": "DataSecretGenerationFailed",
		"message": "failed to resolve files: secret not found", "lastTransitionTime": time.Now().UTC().Format(time.RFC3339),
	}}}}}
	if err := env.Client.Status().Update(t.Context(), config); err != nil {
		t.Fatal(err)
	}
	m1 = kubeenv.NewMachine(v, ns, "c1", "c1-cp-0")
	m1.Object["spec"].(map[string]any)["bootstrap"] = map[string]any{
		"configRef": map[string]any{"apiGroup": kubeadmConfigGVK.Group, "kind": kubeadmConfigGVK.Kind, "name": "c1-cp-0"},
	}
	create(t, m1)
	m2 = createMachine(t, v, ns, "c1", "c1-cp-1")
	lock := lockFor(ns, "c1", "c1-cp-0", cluster)
	create(t, lock)
	startManager(t, env.Config, testOptions(ns))
	time.Sleep(time.Second) // the manager has seen the lock
	_ = env.Client.Delete(t.Context(), lock.DeepCopy())
	time.Sleep(time.Second) // the manager has seen the delete
	return cluster, m1, config, m2
}

// getCluster reads cluster again.
func getCluster(t *testing.T, cluster *unstructured.Unstructured) *unstructured.Unstructured {
	t.Helper()
	out := cluster.DeepCopy()
	if err := env.Client.Get(t.Context(), client.ObjectKeyFromObject(cluster), out); err != nil {
		t.Fatal(err)
	}
	return out
}

// TestClusterFirstRestoreWaitsForTheHolder: a restore brings a Cluster and
// its lock back before the Machines (a copy applied in file order, a
// restore with another resource order). Until the grace period has passed
// since the lock was created, the manager does not take the holder's
// absence for its deletion: it releases nothing, and once the Machines are
// back the lock still names its holder, so that no stock provider grants it
// to another Machine.
func TestClusterFirstRestoreWaitsForTheHolder(t *testing.T) {
	ns := env.Namespace(t)
	cluster := createCluster(t, v, ns, "c1")
	create(t, lockFor(ns, "c1", "c1-cp-0", nil))
	opts := testOptions(ns)
	opts.OrphanGrace = time.Minute
	rm := startManager(t, env.Config, opts)
	kubeenv.Consistently(t, 3*time.Second, lockIs(t, ns, "c1", present))
	createMachine(t, v, ns, "c1", "c1-cp-0")
	createMachine(t, v, ns, "c1", "c1-cp-1")
	kubeenv.Eventually(t, 20*time.Second, lockIs(t, ns, "c1", ownedBy(cluster)))
	kubeenv.Consistently(t, 2*time.Second, lockIs(t, ns, "c1", func(cm *corev1.ConfigMap) error {
		if cm.DeletionTimestamp != nil || !strings.Contains(cm.Data[wire.DataKey], `"c1-cp-0"`) {
			return fmt.Errorf("the lock changed: deleting %v, record %s", cm.DeletionTimestamp != nil, cm.Data[wire.DataKey])
		}
		return kubeenv.LockOwnedBy(cm, cluster)
	}))
	if n, d := rm.Counter.Of("configmaps", ns).Writes(), rm.Counter.Of("configmaps", ns).Count("delete"); n != 1 || d != 0 {
		t.Fatalf("configmap writes = %d with %d deletes, want 1 (the adoption) and no delete:\n%s", n, d, rm.Counter)
	}
}

// TestRestoreOverAKeptLockWaitsForTheHolder: a lock older than the grace
// period outlives its Cluster and its holder (the lock guard keeps it); a
// restore then brings the Cluster back and, a second later, the holder,
// leaving the kept lock as it is (Velero skips what exists). The lock is
// old but its Cluster is young: the manager waits for the holder, and the
// lock keeps naming it once it is back.
func TestRestoreOverAKeptLockWaitsForTheHolder(t *testing.T) {
	ns := env.Namespace(t)
	cluster := createCluster(t, v, ns, "c1")
	holder := createMachine(t, v, ns, "c1", "c1-cp-0")
	create(t, lockFor(ns, "c1", "c1-cp-0", cluster))
	opts := testOptions(ns)
	opts.OrphanGrace = 4 * time.Second
	startManager(t, env.Config, opts)
	time.Sleep(opts.OrphanGrace + time.Second) // the lock is older than the grace period
	for _, obj := range []client.Object{cluster, holder} {
		if err := env.Client.Delete(t.Context(), obj.DeepCopyObject().(client.Object)); err != nil {
			t.Fatal(err)
		}
	}
	kubeenv.Eventually(t, 10*time.Second, func() error {
		if err := env.Client.Get(t.Context(), client.ObjectKeyFromObject(cluster), cluster.DeepCopy()); !apierrors.IsNotFound(err) {
			return fmt.Errorf("the cluster is not gone yet: %w", err)
		}
		return nil
	})
	createCluster(t, v, ns, "c1") // restored
	time.Sleep(time.Second)
	createMachine(t, v, ns, "c1", "c1-cp-0") // restored a second later
	kubeenv.Consistently(t, 3*time.Second, lockIs(t, ns, "c1", holds("c1-cp-0")))
}

// TestHolderRestoredAloneKeepsItsLock: a partial restore brings the holder
// Machine back alone, under a new UID, while its Cluster keeps its own and
// the lock and the grant register, written as pkg/initlock writes them,
// still name the Machine's earlier UID. The Machine carries its bootstrap
// data again, init data perhaps: it is the holder still. Past the grace
// period the manager releases nothing and writes nothing to the lock but
// its adoption, and the lock keeps naming the Machine.
func TestHolderRestoredAloneKeepsItsLock(t *testing.T) {
	ns := env.Namespace(t)
	cluster := createCluster(t, v, ns, "c1")
	createMachine(t, v, ns, "c1", "c1-cp-0") // restored: a UID of its own
	createMachine(t, v, ns, "c1", "c1-cp-1") // waiting for the lock
	rec, err := json.Marshal(wire.Record{Ref: wire.Ref{MachineName: "c1-cp-0", MachineUID: "uid-before-the-restore", ClusterUID: cluster.GetUID()}, Token: "t1"})
	if err != nil {
		t.Fatal(err)
	}
	record := string(rec)
	cluster.SetAnnotations(map[string]string{wire.GrantAnnotation: record})
	if err := env.Client.Update(t.Context(), cluster); err != nil {
		t.Fatal(err)
	}
	lock := lockFor(ns, "c1", "c1-cp-0", cluster)
	lock.Data[wire.DataKey] = record
	create(t, lock)

	opts := testOptions(ns)
	opts.OrphanGrace = 2 * time.Second
	rm := startManager(t, env.Config, opts)
	time.Sleep(opts.OrphanGrace) // the lock and the Cluster are older than the grace period
	kubeenv.Consistently(t, 3*time.Second, lockIs(t, ns, "c1", func(cm *corev1.ConfigMap) error {
		if cm.Data[wire.DataKey] != record || cm.DeletionTimestamp != nil {
			return fmt.Errorf("the restored holder's lock changed: deleting %v, record %s", cm.DeletionTimestamp != nil, cm.Data[wire.DataKey])
		}
		return nil
	}))
	wantWrites(t, rm, "configmaps", ns, 0, "(the lock is owned already)")
}
