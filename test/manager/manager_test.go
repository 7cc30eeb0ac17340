package managersuite_test

import (
	"cmp"
	"fmt"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/initlock/initlock/internal/kubeenv"
	"github.com/initlock/initlock/internal/kubeenv/velerosim"
	"github.com/initlock/initlock/internal/kubeenv/wire"
	"github.com/initlock/initlock/pkg/initlock/capi"
	"github.com/initlock/initlock/test/managertest"
)

var env *kubeenv.Env

func TestMain(m *testing.M) {
	kubeenv.Main(m, kubeenv.Options{CAPI: kubeenv.CAPIV1Beta2, LockGuard: true}, &env)
}

const v = capi.V1Beta2

// TestSeedScenario: a lock held by a control-plane Machine survives a
// Velero-style backup, delete and restore (ConfigMaps first, new UIDs, no
// ownerReferences): at rest it costs no write, and the restored lock is
// re-adopted by the new Cluster with one write.
func TestSeedScenario(t *testing.T) {
	ns := env.Namespace(t)
	cluster := createCluster(t, v, ns, "c1")
	machine := createMachine(t, v, ns, "c1", "c1-cp-0")
	create(t, lockFor(ns, "c1", "c1-cp-0", cluster))
	rm := startManager(t, env.Config, testOptions(ns))

	// Held by an existing Machine and owned: nothing to write.
	kubeenv.Consistently(t, 2*time.Second, noWrites(rm, "configmaps", ns))

	// Backup, then lose everything, as a namespace deletion does (the
	// lock guard lets it go then; TestOrphanCollection shows the manager
	// collecting a lock whose Cluster and holder went otherwise).
	backupLock, err := getLock(t, ns, "c1")
	if err != nil {
		t.Fatal(err)
	}
	backup := []client.Object{backupLock.DeepCopy(), machine.DeepCopy(), cluster.DeepCopy()}
	if err := kubeenv.ReleaseLock(t.Context(), env.Client, backupLock); err != nil {
		t.Fatal(err)
	}
	deleteAndWait(t, cluster, machine)
	kubeenv.Eventually(t, 30*time.Second, lockGone(t, ns, "c1"))

	// Restore in Velero's order: ConfigMaps, Machines, Clusters.
	rm.Counter.Reset()
	objs := velerosim.Restore(t, env.Config, velerosim.Options{}, backup...)
	restored := objs[len(objs)-1] // the Cluster, restored last
	if restored.GetKind() != "Cluster" || restored.GetUID() == cluster.GetUID() {
		t.Fatalf("restored last: %s %s, want the Cluster under a new UID (was %s)", restored.GetKind(), restored.GetUID(), cluster.GetUID())
	}
	kubeenv.Eventually(t, 20*time.Second, lockIs(t, ns, "c1", ownedBy(restored)))
	eventOn(t, ns, "LockAdopted", "Cluster", "c1")
	kubeenv.Consistently(t, time.Second, func() error { return nil })
	wantWrites(t, rm, "configmaps", ns, 1, "(the adoption)")
}

// TestReleaseAfterInit: a singleton Cluster whose control plane becomes
// initialised has its lock released with one delete; with the flag off, the
// lock stays.
func TestReleaseAfterInit(t *testing.T) {
	for _, tc := range []struct {
		name    string
		release bool
	}{
		{"release", true},
		{"keep", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ns := env.Namespace(t)
			cluster := createCluster(t, v, ns, "single")
			createMachine(t, v, ns, "single", "single-cp-0")
			create(t, lockFor(ns, "single", "single-cp-0", cluster))
			opts := testOptions(ns)
			opts.ReleaseAfterInit = tc.release
			rm := startManager(t, env.Config, opts)
			releasedBefore := metricValue(t, "initlock_lock_releases_total", "reason=initialized")

			if err := kubeenv.SetInitialized(t.Context(), env.Client, cluster); err != nil {
				t.Fatal(err)
			}
			if !tc.release {
				kubeenv.Consistently(t, 2*time.Second, noWrites(rm, "", ns))
				if _, err := getLock(t, ns, "single"); err != nil {
					t.Fatalf("lock: %v", err)
				}
				return
			}
			kubeenv.Eventually(t, 20*time.Second, lockGone(t, ns, "single"))
			eventOn(t, ns, "LockReleased", "Cluster", "single")
			if n := rm.Counter.Of("configmaps", ns).Count("delete"); n != 1 {
				t.Fatalf("deletes = %d, want 1:\n%s", n, rm.Counter)
			}
			wantWrites(t, rm, "configmaps", ns, 2, "(the release mark, the delete)")
			if d := metricValue(t, "initlock_lock_releases_total", "reason=initialized") - releasedBefore; d != 1 {
				t.Fatalf("releases metric grew by %v, want 1", d)
			}
		})
	}
}

// TestPaused: nothing is written while the Cluster is paused (spec.paused
// or the annotation); the lock is healed once it is unpaused.
func TestPaused(t *testing.T) {
	for _, tc := range []struct {
		name    string
		pause   func(*unstructured.Unstructured)
		unpause func(*unstructured.Unstructured)
	}{
		{"spec", paused, func(u *unstructured.Unstructured) { unstructured.RemoveNestedField(u.Object, "spec", "paused") }},
		{"annotation",
			func(u *unstructured.Unstructured) { u.SetAnnotations(map[string]string{capi.PausedAnnotation: ""}) },
			func(u *unstructured.Unstructured) { u.SetAnnotations(nil) }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ns := env.Namespace(t)
			cluster := createCluster(t, v, ns, "p", tc.pause)
			createMachine(t, v, ns, "p", "p-cp-0")
			create(t, lockFor(ns, "p", "p-cp-0", nil)) // unowned, as after a restore
			rm := startManager(t, env.Config, testOptions(ns))

			kubeenv.Consistently(t, 2*time.Second, noWrites(rm, "", ""))

			if err := env.Client.Get(t.Context(), client.ObjectKeyFromObject(cluster), cluster); err != nil {
				t.Fatal(err)
			}
			tc.unpause(cluster)
			if err := env.Client.Update(t.Context(), cluster); err != nil {
				t.Fatal(err)
			}
			kubeenv.Eventually(t, 20*time.Second, lockIs(t, ns, "p", ownedBy(cluster)))
			kubeenv.Consistently(t, time.Second, func() error { return nil })
			wantWrites(t, rm, "configmaps", ns, 1, "(the adoption)")
		})
	}
}

// TestOrphanCollection: a lock whose Cluster is absent is marked, kept while
// its holder Machine exists, and collected once the Machine is gone and the
// grace period has passed (managertest.OrphanCollection).
func TestOrphanCollection(t *testing.T) { managertest.OrphanCollection(t, env, v) }

// TestNotALock: a ConfigMap with the lock's name that is not a lock, and a
// corrupt lock, are never written; each gets one Warning event on the
// Cluster.
func TestNotALock(t *testing.T) {
	for _, tc := range []struct {
		name   string
		cm     func(ns string) *corev1.ConfigMap
		reason string
		state  string
	}{
		{"unlabelled", func(ns string) *corev1.ConfigMap {
			cm := lockFor(ns, "x", "x-cp-0", nil)
			cm.Labels = nil
			return cm
		}, "ForeignConfigMap", "foreign"},
		{"no-data-key", func(ns string) *corev1.ConfigMap {
			cm := lockFor(ns, "x", "x-cp-0", nil)
			cm.Data = map[string]string{"other": "value"}
			return cm
		}, "ForeignConfigMap", "foreign"},
		{"other-cluster-label", func(ns string) *corev1.ConfigMap {
			cm := lockFor(ns, "x", "x-cp-0", nil)
			cm.Labels[wire.ClusterNameLabel] = "y"
			return cm
		}, "ForeignConfigMap", "foreign"},
		{"corrupt", func(ns string) *corev1.ConfigMap {
			cm := lockFor(ns, "x", "x-cp-0", nil)
			cm.Data[wire.DataKey] = "{not json"
			return cm
		}, "CorruptLock", "corrupt"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ns := env.Namespace(t)
			createCluster(t, v, ns, "x")
			cm := tc.cm(ns)
			create(t, cm)
			rm := startManager(t, env.Config, testOptions(ns))

			eventOn(t, ns, tc.reason, "Cluster", "x")
			kubeenv.Eventually(t, 10*time.Second, func() error {
				if g := metricValue(t, "initlock_locks", "state="+tc.state); g < 1 {
					return fmt.Errorf("initlock_locks{state=%q} = %v", tc.state, g)
				}
				return nil
			})
			// Another reconcile (a Machine of the Cluster appears) emits
			// no second event.
			createMachine(t, v, ns, "x", "x-cp-0")
			kubeenv.Consistently(t, 2*time.Second, eventCount(t, ns, tc.reason, 1))
			wantWrites(t, rm, "configmaps", "", 0, "")
			got, err := getLock(t, ns, "x")
			if err != nil {
				t.Fatal(err)
			}
			if got.ResourceVersion != cm.ResourceVersion {
				t.Fatalf("ConfigMap changed: resourceVersion %s, created as %s", got.ResourceVersion, cm.ResourceVersion)
			}
		})
	}
}

// TestOtherProvidersLock: KubeKey's Cluster API provider takes a ConfigMap
// of the lock's name, label and data key for its in-place upgrades, with
// the record {"kkInstanceName":…}, which names no Machine. It is left to
// the provider that wrote it: the manager writes nothing and warns
// nothing, and the lock guard lets the provider's own release (a plain
// delete) through.
func TestOtherProvidersLock(t *testing.T) {
	ns := env.Namespace(t)
	createCluster(t, v, ns, "x")
	createMachine(t, v, ns, "x", "x-cp-0")
	cm := lockFor(ns, "x", "x-cp-0", nil)
	cm.Data[wire.DataKey] = `{"kkInstanceName":"kk-upgrade-0"}`
	create(t, cm)
	rm := startManager(t, env.Config, testOptions(ns))
	kubeenv.Eventually(t, 10*time.Second, func() error {
		if g := metricValue(t, "initlock_locks", "state=foreign"); g < 1 {
			return fmt.Errorf("initlock_locks{state=\"foreign\"} = %v", g)
		}
		return nil
	})
	kubeenv.Consistently(t, 2*time.Second, func() error {
		return cmp.Or(eventCount(t, ns, "ForeignConfigMap", 0)(), eventCount(t, ns, "CorruptLock", 0)())
	})
	wantWrites(t, rm, "configmaps", "", 0, "")
	if err := env.Client.Delete(t.Context(), cm.DeepCopy()); err != nil {
		t.Fatalf("KubeKey's release of its own lock: %v, want it let through", err)
	}
}

// TestDeletingClusterReleasesItsLock: the lock guard refuses the garbage
// collector's delete of a Cluster's lock, so the manager releases the lock
// of a Cluster being deleted, owned or not, once the Machine it names is
// gone (Cluster API deletes the Machines first): while that Machine
// exists, a stock provider would grant a released lock to another.
func TestDeletingClusterReleasesItsLock(t *testing.T) {
	for _, owned := range []bool{true, false} {
		t.Run(fmt.Sprintf("owned=%t", owned), func(t *testing.T) {
			ns := env.Namespace(t)
			cluster := createCluster(t, v, ns, "d", func(u *unstructured.Unstructured) {
				u.SetFinalizers([]string{"test.initlock.dev/hold"})
			})
			holder := createMachine(t, v, ns, "d", "d-cp-0")
			owner := cluster
			if !owned {
				owner = nil
			}
			create(t, lockFor(ns, "d", "d-cp-0", owner))
			if err := env.Client.Delete(t.Context(), cluster); err != nil {
				t.Fatal(err)
			}
			rm := startManager(t, env.Config, testOptions(ns))
			// The lock stays while the Machine it names exists.
			kubeenv.Consistently(t, 3*time.Second, lockIs(t, ns, "d", present))
			wantWrites(t, rm, "configmaps", ns, 0, "while the holder exists")
			deleteAndWait(t, holder)
			kubeenv.Eventually(t, 20*time.Second, lockGone(t, ns, "d"))
			if n, d := rm.Counter.Of("configmaps", ns).Writes(), rm.Counter.Of("configmaps", ns).Count("delete"); n != 2 || d != 1 {
				t.Fatalf("writes = %d with %d deletes, want 2 with 1 (the release mark, the delete):\n%s", n, d, rm.Counter)
			}
			if err := env.Client.Get(t.Context(), client.ObjectKeyFromObject(cluster), cluster); err == nil {
				cluster.SetFinalizers(nil)
				if err := env.Client.Update(t.Context(), cluster); err != nil {
					t.Fatal(err)
				}
			}
		})
	}
}

// TestConflictWarning: the lock and the Cluster's grant register name two
// existing Machines (a restore from a backup taken while two calls were in
// flight can leave them so). Only a person can tell which one, if any,
// runs kubeadm init: the manager writes nothing and says so once, with a
// LockConflict warning on the Cluster.
func TestConflictWarning(t *testing.T) {
	ns := env.Namespace(t)
	cluster := createCluster(t, v, ns, "x", func(u *unstructured.Unstructured) {
		u.SetAnnotations(map[string]string{wire.GrantAnnotation: `{"machineName":"x-cp-1","token":"t1"}`})
	})
	createMachine(t, v, ns, "x", "x-cp-0")
	createMachine(t, v, ns, "x", "x-cp-1")
	cm := lockFor(ns, "x", "x-cp-0", cluster)
	create(t, cm)
	rm := startManager(t, env.Config, testOptions(ns))

	e := eventOn(t, ns, "LockConflict", "Cluster", "x")
	if !strings.Contains(e.Note, "x-cp-0") || !strings.Contains(e.Note, "x-cp-1") || !strings.Contains(e.Note, "kubectl initlock release") {
		t.Errorf("LockConflict note %q does not name both Machines and the way out", e.Note)
	}
	kubeenv.Consistently(t, 2*time.Second, eventCount(t, ns, "LockConflict", 1))
	got, err := getLock(t, ns, "x")
	if err != nil {
		t.Fatal(err)
	}
	if got.Data[wire.DataKey] != cm.Data[wire.DataKey] {
		t.Fatalf("the record of the lock in conflict was written: %s", got.Data[wire.DataKey])
	}
	wantWrites(t, rm, "configmaps", "", 0, "")
}
