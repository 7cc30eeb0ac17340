package managersuite_test

import (
	"cmp"
	"fmt"
	"testing"
	"time"

	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/initlock/initlock/internal/controllers/lock"
	"github.com/initlock/initlock/internal/kubeenv"
	"github.com/initlock/initlock/internal/kubeenv/velerosim"
)

// TestObserveOnly: an observe-only manager (--observe-only) running through
// a restore storm (stormClusters Clusters restored, in Velero's order, with
// their locks left unowned) and over an initialised Cluster whose lock is
// still held reports the write it would make to each lock
// (initlock_lock_planned_actions, a LockActionPlanned event per lock) and
// writes nothing but those events: no lock, Cluster or Machine. A manager
// started afterwards makes exactly the writes reported.
func TestObserveOnly(t *testing.T) {
	const stormClusters = 12
	ns := env.Namespace(t)
	done := createCluster(t, v, ns, "done")
	createMachine(t, v, ns, "done", "done-cp-0")
	create(t, lockFor(ns, "done", "done-cp-0", done))
	if err := kubeenv.SetInitialized(t.Context(), env.Client, done); err != nil {
		t.Fatal(err)
	}
	opts := testOptions(ns)
	opts.ObserveOnly = true
	planned := func(action string) float64 { return metricValue(t, "initlock_lock_planned_actions", "action="+action) }
	adopt0, release0 := planned("adopt"), planned("release")
	rm := startManager(t, env.Config, opts)

	var backup []client.Object
	for i := range stormClusters {
		c := fmt.Sprintf("c%d", i)
		backup = append(backup, lockFor(ns, c, c+"-cp-0", nil), kubeenv.NewMachine(v, ns, c, c+"-cp-0"), kubeenv.NewCluster(v, ns, c))
	}
	velerosim.Restore(t, env.Config, velerosim.Options{}, backup...)
	kubeenv.Eventually(t, time.Minute, func() error {
		if a, r := planned("adopt")-adopt0, planned("release")-release0; a != stormClusters || r != 1 {
			return fmt.Errorf("planned adoptions %.0f, releases %.0f; want %d and 1", a, r, stormClusters)
		}
		if n := len(events(t, ns, lock.ReasonLockActionPlanned)); n != stormClusters+1 {
			return fmt.Errorf("%d %s events, want %d", n, lock.ReasonLockActionPlanned, stormClusters+1)
		}
		return nil
	})
	kubeenv.Consistently(t, 2*time.Second, func() error {
		if err := cmp.Or(noWrites(rm, "configmaps", ns)(), noWrites(rm, "clusters", ns)(), noWrites(rm, "machines", ns)()); err != nil {
			return err
		}
		if all, ev := rm.Counter.Writes(), rm.Counter.Of("events", ns).Writes(); all != ev {
			return fmt.Errorf("%d writes, of which %d events; want only events:\n%s", all, ev, rm.Counter)
		}
		return nil
	})
	rm.Stop()

	// What it reported is what a manager does.
	rm = startManager(t, env.Config, testOptions(ns))
	kubeenv.Eventually(t, time.Minute, lockGone(t, ns, "done"))
	for i := range stormClusters {
		cl := kubeenv.NewCluster(v, ns, fmt.Sprintf("c%d", i))
		kubeenv.Eventually(t, time.Minute, func() error {
			if err := env.Client.Get(t.Context(), client.ObjectKeyFromObject(cl), cl); err != nil {
				return err
			}
			return lockIs(t, ns, cl.GetName(), ownedBy(cl))()
		})
	}
	kubeenv.Eventually(t, time.Minute, func() error {
		if n, want := rm.Counter.Of("configmaps", ns).Writes(), stormClusters+2; n != want {
			return fmt.Errorf("configmap writes = %d, want %d (an adoption each; a release: its mark and its delete):\n%s", n, want, rm.Counter)
		}
		return nil
	})
}
