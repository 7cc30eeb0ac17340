package manager_test

import (
	"fmt"
	"slices"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/initlock/initlock/internal/kubeenv"
	"github.com/initlock/initlock/pkg/initlock/engine"
)

var kubeadmConfigGVK = schema.GroupVersionKind{Group: "bootstrap.cluster.x-k8s.io", Version: "v1beta2", Kind: "KubeadmConfig"}

// machineWithoutData creates control-plane Machine name of cluster with a
// KubeadmConfig of its name and no bootstrap data yet, as CABPK sees it
// before it generates the init data.
func machineWithoutData(t *testing.T, ns, cluster, name string) (machine, config *unstructured.Unstructured) {
	t.Helper()
	config = &unstructured.Unstructured{}
	config.SetGroupVersionKind(kubeadmConfigGVK)
	config.SetNamespace(ns)
	config.SetName(name)
	config.Object["spec"] = map[string]any{"format": "cloud-config"}
	create(t, config)
	machine = kubeenv.NewMachine(v, ns, cluster, name)
	machine.Object["spec"].(map[string]any)["bootstrap"] = map[string]any{
		"configRef": map[string]any{"apiGroup": kubeadmConfigGVK.Group, "kind": kubeadmConfigGVK.Kind, "name": name},
	}
	create(t, machine)
	return machine, config
}

// failBootstrap makes config report what CABPK reports when it cannot
// generate the init data (and releases the lock).
func failBootstrap(t *testing.T, config *unstructured.Unstructured) {
	t.Helper()
	fresh := config.DeepCopy()
	if err := env.Client.Get(t.Context(), client.ObjectKeyFromObject(config), fresh); err != nil {
		t.Fatal(err)
	}
	fresh.Object["status"] = map[string]any{"deprecated": map[string]any{"v1beta1": map[string]any{"conditions": []any{map[string]any{
		"type": "DataSecretAvailable", "status": "False", "severity": "Warning", "reason": "DataSecretGenerationFailed",
		"message": "failed to resolve files: secret not found", "lastTransitionTime": time.Now().UTC().Format(time.RFC3339),
	}}}}}
	if err := env.Client.Status().Update(t.Context(), fresh); err != nil {
		t.Fatal(err)
	}
}

// protectedLock waits until the lock of cluster carries the finalizer.
func protectedLock(t *testing.T, ns, cluster string) *corev1.ConfigMap {
	t.Helper()
	var cm *corev1.ConfigMap
	kubeenv.Eventually(t, 20*time.Second, func() error {
		var err error
		if cm, err = getLock(t, ns, cluster); err != nil {
			return err
		}
		if !slices.Contains(cm.Finalizers, engine.HeldFinalizer) {
			return fmt.Errorf("lock not protected yet")
		}
		return nil
	})
	return cm
}

// TestHeldLockSurvivesDelete: a lock held by an existing Machine of an
// uninitialised Cluster is protected; a delete of it (by the garbage
// collector, an operator, a provider's release) is held back, said once,
// and the lock goes only once its holder is gone.
func TestHeldLockSurvivesDelete(t *testing.T) {
	ns := env.Namespace(t)
	cluster := createCluster(t, v, ns, "c1")
	m1 := createMachine(t, v, ns, "c1", "c1-cp-0")
	create(t, lockFor(ns, "c1", "c1-cp-0", cluster))
	opts := testOptions(ns)
	opts.HeldRecheck = 500 * time.Millisecond
	rm := startManager(t, env.Config, opts)
	heldBefore := counterValue(t, "initlock_lock_deletes_held_total", "")

	cm := protectedLock(t, ns, "c1")
	if err := env.Client.Delete(t.Context(), cm); err != nil { // kubectl delete configmap c1-lock
		t.Fatal(err)
	}
	eventOn(t, ns, "LockDeleteHeldBack", "Cluster", "c1")
	kubeenv.Consistently(t, 2*time.Second, func() error {
		cm, err := getLock(t, ns, "c1")
		if err != nil {
			return fmt.Errorf("the held lock went while its holder exists: %w", err)
		}
		if cm.DeletionTimestamp == nil {
			return fmt.Errorf("lock not being deleted")
		}
		return nil
	})
	if n := len(events(t, ns, "LockDeleteHeldBack")); n != 1 {
		t.Errorf("%d LockDeleteHeldBack events, want 1", n)
	}
	if d := counterValue(t, "initlock_lock_deletes_held_total", "") - heldBefore; d != 1 {
		t.Errorf("initlock_lock_deletes_held_total grew by %v, want 1", d)
	}
	// The protect patch is the one write so far.
	if n := rm.Counter.Of("configmaps", ns).Writes(); n != 1 {
		t.Fatalf("configmap writes = %d, want 1:\n%s", n, rm.Counter)
	}

	deleteAndWait(t, m1)
	kubeenv.Eventually(t, 20*time.Second, lockGone(t, ns, "c1"))
	eventOn(t, ns, "LockUnprotected", "Cluster", "c1")
	if n := rm.Counter.Of("configmaps", ns).Writes(); n != 2 {
		t.Fatalf("configmap writes = %d, want 2 (protect, then the finalizer off):\n%s", n, rm.Counter)
	}
}

// TestFailedInitReleased: the holder's bootstrap provider released the
// lock after failing to generate the init data (the holder has no data,
// and its KubeadmConfig says why). The lock is disarmed, so that no
// provider takes it for the holder, and let go after the settle time; a
// holder that gets its data meanwhile gets the lock back.
func TestFailedInitReleased(t *testing.T) {
	for _, tc := range []struct {
		name string
		// recover gives the holder its data while the lock is disarmed.
		recover bool
	}{{"the failure stays: let go", false}, {"the holder gets its data: given back", true}} {
		t.Run(tc.name, func(t *testing.T) {
			ns := env.Namespace(t)
			cluster := createCluster(t, v, ns, "c1")
			m1, kc := machineWithoutData(t, ns, "c1", "c1-cp-0")
			create(t, lockFor(ns, "c1", "c1-cp-0", cluster))
			opts := testOptions(ns)
			opts.FailedInitSettle, opts.HeldRecheck = 3*time.Second, 300*time.Millisecond
			startManager(t, env.Config, opts)

			cm := protectedLock(t, ns, "c1")
			failBootstrap(t, kc)
			if err := env.Client.Delete(t.Context(), cm); err != nil { // CABPK's Unlock after the failure
				t.Fatal(err)
			}
			kubeenv.Eventually(t, 10*time.Second, func() error {
				cm, err := getLock(t, ns, "c1")
				if err != nil {
					return err
				}
				if _, ok := cm.Annotations[engine.DisarmedAnnotation]; !ok {
					return fmt.Errorf("lock not disarmed yet")
				}
				if rec, _ := engine.DecodeRecord(cm.Data[engine.DataKey]); rec.MachineName != engine.DisarmedHolder {
					return fmt.Errorf("disarmed lock names %s", rec.MachineName)
				}
				return nil
			})
			eventOn(t, ns, "LockDisarmed", "Cluster", "c1")

			if !tc.recover {
				kubeenv.Eventually(t, 20*time.Second, lockGone(t, ns, "c1"))
				eventOn(t, ns, "LockUnprotected", "Cluster", "c1")
				return
			}
			patch := []byte(`{"spec":{"bootstrap":{"dataSecretName":"c1-cp-0"}}}`)
			if err := env.Client.Patch(t.Context(), m1, client.RawPatch(types.MergePatchType, patch)); err != nil {
				t.Fatal(err)
			}
			kubeenv.Eventually(t, 10*time.Second, func() error {
				cm, err := getLock(t, ns, "c1")
				if err != nil {
					return err
				}
				if rec, _ := engine.DecodeRecord(cm.Data[engine.DataKey]); rec.MachineName != "c1-cp-0" {
					return fmt.Errorf("lock names %s, want it given back to c1-cp-0", rec.MachineName)
				}
				return nil
			})
			eventOn(t, ns, "LockRearmed", "Cluster", "c1")
			kubeenv.Consistently(t, 2*opts.FailedInitSettle, func() error {
				_, err := getLock(t, ns, "c1")
				return err
			})
		})
	}
}
