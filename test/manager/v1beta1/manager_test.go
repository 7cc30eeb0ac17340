package v1beta1

import (
	"fmt"
	"testing"
	"time"

	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/initlock/initlock/internal/kubeenv"
	"github.com/initlock/initlock/internal/kubeenv/velerosim"
	"github.com/initlock/initlock/pkg/initlock/capi"
	"github.com/initlock/initlock/test/managertest"
)

var env *kubeenv.Env

func TestMain(m *testing.M) {
	kubeenv.Main(m, kubeenv.Options{CAPI: kubeenv.CAPIV1Beta1}, &env)
}

const v = capi.V1Beta1

// TestV1Beta1Only: on a management cluster that serves only v1beta1, the
// manager re-adopts a restored lock with one write, pointing it at the
// v1beta1 Cluster, and releases it once the ControlPlaneInitialized
// condition is true.
func TestV1Beta1Only(t *testing.T) {
	if got, err := capi.Discover(env.Discovery(t)); err != nil || got != v {
		t.Fatalf("discovered %q (%v), want %s", got, err, v)
	}
	ns := env.Namespace(t)
	c := env.Client
	rm := managertest.Start(t, env.Config, managertest.Options(ns))

	// A restore: the lock first, without ownerReferences, then the holder
	// Machine, then the Cluster.
	restored := velerosim.Restore[client.Object](t, env.Config, velerosim.Options{},
		kubeenv.NewLock(ns, "old", "old-cp-0", nil), kubeenv.NewMachine(v, ns, "old", "old-cp-0"), kubeenv.NewCluster(v, ns, "old"))
	cluster := restored[len(restored)-1]
	kubeenv.Eventually(t, 20*time.Second, func() error {
		cm, err := kubeenv.GetLock(t.Context(), c, ns, "old")
		if err != nil {
			return err
		}
		if err := kubeenv.LockOwnedBy(cm, cluster); err != nil {
			return err
		}
		if got := cm.OwnerReferences[0].APIVersion; got != capi.Group+"/"+v {
			return fmt.Errorf("owner apiVersion %s, want %s/%s", got, capi.Group, v)
		}
		return nil
	})
	managertest.EventOn(t, c, ns, "LockAdopted", "Cluster", "old")
	kubeenv.Consistently(t, time.Second, func() error { return nil })
	managertest.WantWrites(t, rm, "configmaps", ns, 1, "(the adoption)")

	// The v1beta1 condition releases the lock.
	rm.Counter.Reset()
	if err := kubeenv.SetInitialized(t.Context(), c, cluster); err != nil {
		t.Fatal(err)
	}
	kubeenv.Eventually(t, 20*time.Second, kubeenv.LockGone(t.Context(), c, ns, "old"))
	managertest.EventOn(t, c, ns, "LockReleased", "Cluster", "old")
	if n := rm.Counter.Of("configmaps", ns).Count("delete"); n != 1 {
		t.Fatalf("deletes = %d, want 1:\n%s", n, rm.Counter)
	}
	managertest.WantWrites(t, rm, "configmaps", ns, 2, "(the release mark, the delete)")
}

// TestV1Beta1OrphanCollected: on a management cluster that serves only
// v1beta1, an orphan lock (its Cluster absent) is marked and, once its
// holder is gone too, collected (managertest.OrphanCollection): the live
// confirmations read the Cluster and the holder in v1beta1, the version the
// server serves, never in a default version it does not serve.
func TestV1Beta1OrphanCollected(t *testing.T) { managertest.OrphanCollection(t, env, v) }
