package contention

import (
	"context"
	"fmt"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	"k8s.io/client-go/rest"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/cluster-api/bootstrap/kubeadm/pkg/locking"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	"github.com/initlock/initlock/internal/kubeenv"
	"github.com/initlock/initlock/internal/kubeenv/wire"
	"github.com/initlock/initlock/pkg/initlock"
	"github.com/initlock/initlock/pkg/initlock/capi"
	"github.com/initlock/initlock/test/managertest"
)

// TestUpstreamUnlockRace runs CABPK v1.14.2's own mutex against a lock
// naming a deleted Machine m0. Upstream's Lock for m2 reads the lock, finds
// m0 gone and deletes the lock without preconditions. Between its read of
// m0 and its delete, initlock's Lock takes the lock over for m1 and is told
// Acquired. Upstream alone, the delete removes m1's lock and upstream's next
// Lock grants m2: two Machines run init. With initlock's lock guard
// installed, the delete is refused from the instant the lock exists (no
// controller has to get to it first), and m2 is refused.
func TestUpstreamUnlockRace(t *testing.T) {
	for _, guarded := range []bool{false, true} {
		t.Run(fmt.Sprintf("guard=%t", guarded), func(t *testing.T) {
			ctx := t.Context()
			ns := env.Namespace(t)
			if guarded {
				if err := env.InstallLockGuard(ctx); err != nil {
					t.Fatal(err)
				}
				t.Cleanup(func() { env.RemoveLockGuard(t) })
			}
			cl := kubeenv.NewCluster(capi.V1Beta2, ns, "c1")
			managertest.Create(t, env.Client, cl)
			m1, m2 := kubeenv.NewMachine(capi.V1Beta2, ns, "c1", "m1"), kubeenv.NewMachine(capi.V1Beta2, ns, "c1", "m2")
			managertest.Create(t, env.Client, m1)
			managertest.Create(t, env.Client, m2)
			managertest.Create(t, env.Client, kubeenv.NewLock(ns, "c1", "m0", cl))

			var tookOver initlock.Result
			raced := false
			upstream := interceptor.NewClient(typedClient(t, env.Config), interceptor.Funcs{
				Get: func(ctx context.Context, c client.WithWatch, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
					err := c.Get(ctx, key, obj, opts...)
					if _, ok := obj.(*clusterv1.Machine); ok && key.Name == "m0" && apierrors.IsNotFound(err) && !raced {
						// Between upstream's read of m0 and its delete.
						raced = true
						var lerr error
						if tookOver, lerr = initlock.New(env.Client).Lock(ctx, cl, m1); lerr != nil {
							t.Errorf("initlock Lock for m1: %v", lerr)
						}
					}
					return err
				},
			})
			mutex := locking.NewControlPlaneInitMutex(upstream)
			if mutex.Lock(ctx, typed[clusterv1.Cluster](t, cl), typed[clusterv1.Machine](t, m2)) {
				t.Fatal("upstream Lock for m2 acquired a lock naming m0 at once; want it refused")
			}
			if !raced || !tookOver.Acquired {
				t.Fatalf("attack not exercised: raced %t, m1 acquired %t", raced, tookOver.Acquired)
			}
			// CABPK's next reconcile of m2.
			m2Acquired := mutex.Lock(ctx, typed[clusterv1.Cluster](t, cl), typed[clusterv1.Machine](t, m2))
			cm := &corev1.ConfigMap{}
			err := env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: "c1-lock"}, cm)
			t.Logf("guard %t: m1 took the lock over; upstream's Unlock for m2 then deleted it, or tried; upstream's next Lock for m2: acquired %t; lock: %s",
				guarded, m2Acquired, describe(cm, err))
			if !guarded {
				if !m2Acquired {
					t.Fatal("upstream alone: want the race to grant m2 while m1 holds the lock (the defect the lock guard closes); it did not")
				}
				return
			}
			if m2Acquired {
				t.Fatal("with the lock guard: m2 acquired the lock while m1 holds it")
			}
			if rec, _ := wire.DecodeRecord(cm.Data[wire.DataKey]); err != nil || cm.DeletionTimestamp != nil || rec.MachineName != "m1" {
				t.Fatalf("with the lock guard: want m1's lock as it was; got %s", describe(cm, err))
			}
			again, err := initlock.New(env.Client).Lock(ctx, cl, m1)
			if err != nil || !again.Acquired {
				t.Fatalf("with the lock guard: m1's re-Lock: %+v, %v; want acquired", again, err)
			}
		})
	}
}

// typedClient returns a client of cfg for ConfigMaps and Cluster API's
// typed objects, as CABPK's is.
func typedClient(tb testing.TB, cfg *rest.Config) client.WithWatch {
	tb.Helper()
	s := runtime.NewScheme()
	utilruntime.Must(corev1.AddToScheme(s))
	utilruntime.Must(clusterv1.AddToScheme(s))
	c, err := client.NewWithWatch(cfg, client.Options{Scheme: s})
	if err != nil {
		tb.Fatal(err)
	}
	return c
}

func typed[T any](t *testing.T, u *unstructured.Unstructured) *T {
	t.Helper()
	var out T
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, &out); err != nil {
		t.Fatal(err)
	}
	return &out
}

func describe(cm *corev1.ConfigMap, err error) string {
	if err != nil {
		return err.Error()
	}
	rec, _ := wire.DecodeRecord(cm.Data[wire.DataKey])
	return fmt.Sprintf("holder %q, being deleted %t", rec.MachineName, cm.DeletionTimestamp != nil)
}
