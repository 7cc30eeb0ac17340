package contention

import (
	"fmt"
	"slices"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/cluster-api/bootstrap/kubeadm/pkg/locking"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/initlock/initlock/internal/kubeenv"
	"github.com/initlock/initlock/internal/kubeenv/velerosim"
	"github.com/initlock/initlock/pkg/initlock/capi"
	"github.com/initlock/initlock/test/managertest"
)

// staleCopyRuns is how many copies each variant of TestStaleOwnerCopy makes.
const staleCopyRuns = 20

// TestStaleOwnerCopy: CABPK v1.14.2's own mutex takes the lock for m1;
// right then the namespace is backed up and copied into a new namespace as
// "kubectl get -o yaml | kubectl apply" does, keeping the lock's
// ownerReference to the old Cluster UID. The copy restores the lock before
// its Cluster (Velero's order), so the garbage collector finds the owner
// missing at once. A second Machine m2 is added to the copy a second
// later, and the upstream mutex asked for it. With initlock-manager (default
// options) and its lock guard installed, m2 is refused in every one of
// staleCopyRuns copies. With the manager alone, which can only react once
// the lock and its Cluster exist, the collector deletes the lock first and
// m2 is granted while m1 exists in at least one: the upstream failure the
// guard closes.
func TestStaleOwnerCopy(t *testing.T) {
	mutex := locking.NewControlPlaneInitMutex(typedClient(t, env.Config))
	for _, guarded := range []bool{true, false} {
		t.Run(fmt.Sprintf("guard=%t", guarded), func(t *testing.T) {
			if guarded {
				if err := env.InstallLockGuard(t.Context()); err != nil {
					t.Fatal(err)
				}
				t.Cleanup(func() { env.RemoveLockGuard(t) })
			}
			managertest.Start(t, env.Config, managertest.Options(""))
			granted, gone := 0, 0
			var goneAfter []string
			for range staleCopyRuns {
				m2Granted, lockGone := staleCopy(t, mutex)
				if m2Granted {
					granted++
				}
				if lockGone > 0 {
					gone++
					goneAfter = append(goneAfter, lockGone.Round(time.Millisecond).String())
				}
			}
			t.Logf("guard %t: m2 granted while m1 existed in %d of %d copies; the copied lock went in %d (%v after the copy)",
				guarded, granted, staleCopyRuns, gone, goneAfter)
			switch {
			case guarded && granted != 0:
				t.Fatalf("with the lock guard, m2 was granted while m1 existed in %d of %d copies", granted, staleCopyRuns)
			case !guarded && granted == 0:
				t.Fatalf("without the lock guard, m2 was never granted in %d copies: want the upstream failure the guard closes", staleCopyRuns)
			}
		})
	}
}

// staleCopy runs one copy and tells whether m2 was granted while m1 existed
// in the copy, and when the copied lock went (0: it stayed).
func staleCopy(t *testing.T, mutex *locking.ControlPlaneInitMutex) (bool, time.Duration) {
	ctx := t.Context()
	ns := env.Namespace(t)
	cl := kubeenv.NewCluster(capi.V1Beta2, ns, "c1")
	managertest.Create(t, env.Client, cl)
	m1 := kubeenv.NewMachine(capi.V1Beta2, ns, "c1", "m1")
	managertest.Create(t, env.Client, m1)
	if !mutex.Lock(ctx, typed[clusterv1.Cluster](t, cl), typed[clusterv1.Machine](t, m1)) {
		t.Fatal("upstream Lock for m1 of a free lock: refused")
	}
	backed, err := velerosim.Backup(ctx, env.Client, ns, corev1.SchemeGroupVersion.WithKind("ConfigMap"),
		capi.ClusterGVK(capi.V1Beta2), capi.MachineGVK(capi.V1Beta2))
	if err != nil {
		t.Fatal(err)
	}
	to := env.Namespace(t)
	r, err := velerosim.New(env.Config, velerosim.Options{Naive: true, NamespaceMapping: map[string]string{ns: to}})
	if err != nil {
		t.Fatal(err)
	}
	restored, err := r.Restore(ctx, backed)
	if err != nil {
		t.Fatal(err)
	}
	copied := time.Now()
	i := slices.IndexFunc(restored, func(u *unstructured.Unstructured) bool { return u.GetKind() == "ConfigMap" })
	if i < 0 {
		t.Fatalf("the copy created no lock: %d objects", len(restored))
	}
	var gone time.Duration
	for time.Since(copied) < time.Second {
		cm, err := kubeenv.GetLock(ctx, env.Client, to, "c1")
		if err != nil {
			t.Fatal(err)
		}
		if gone == 0 && (cm == nil || cm.UID != restored[i].GetUID() || cm.DeletionTimestamp != nil) {
			gone = time.Since(copied)
		}
		time.Sleep(10 * time.Millisecond)
	}
	m2 := kubeenv.NewMachine(capi.V1Beta2, to, "c1", "m2")
	managertest.Create(t, env.Client, m2)
	clCopy := get(t, capi.ClusterGVK(capi.V1Beta2), to, "c1")
	if clCopy == nil {
		t.Fatal("the copied Cluster is gone")
	}
	if !mutex.Lock(ctx, typed[clusterv1.Cluster](t, clCopy), typed[clusterv1.Machine](t, m2)) {
		return false, gone
	}
	return get(t, capi.MachineGVK(capi.V1Beta2), to, "m1") != nil, gone
}

// get reads an object; nil when there is none.
func get(t *testing.T, gvk schema.GroupVersionKind, ns, name string) *unstructured.Unstructured {
	t.Helper()
	u := &unstructured.Unstructured{}
	u.SetGroupVersionKind(gvk)
	err := env.Client.Get(t.Context(), client.ObjectKey{Namespace: ns, Name: name}, u)
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		t.Fatal(err)
	}
	return u
}
