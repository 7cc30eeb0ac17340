package managersuite_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/initlock/initlock/internal/kubeenv"
)

// TestEventBudget: a restore of five Clusters with a budget of two Normal
// events adopts every lock, with one write each, but emits two LockAdopted
// events and counts the three it drops.
func TestEventBudget(t *testing.T) {
	ns := env.Namespace(t)
	const n = 5
	for i := range n {
		name := fmt.Sprintf("c%d", i)
		create(t, lockFor(ns, name, name+"-cp-0", nil))
		createMachine(t, v, ns, name, name+"-cp-0")
		createCluster(t, v, ns, name)
	}
	opts := testOptions(ns)
	opts.EventQPS, opts.EventBurst = 0.0001, 2 // two at once, then one in about 3 hours
	dropped0 := metricValue(t, "initlock_events_dropped_total", "reason=LockAdopted")
	rm := startManager(t, env.Config, opts)

	kubeenv.Eventually(t, 30*time.Second, func() error {
		if w := rm.Counter.Of("configmaps", ns).Writes(); w != n {
			return fmt.Errorf("%d configmap writes, want %d", w, n)
		}
		return nil
	})
	kubeenv.Eventually(t, 10*time.Second, eventCount(t, ns, "LockAdopted", 2))
	kubeenv.Consistently(t, 2*time.Second, eventCount(t, ns, "LockAdopted", 2))
	if d := metricValue(t, "initlock_events_dropped_total", "reason=LockAdopted") - dropped0; d != n-2 {
		t.Errorf("initlock_events_dropped_total{reason=LockAdopted} rose by %g, want %d", d, n-2)
	}
	wantWrites(t, rm, "configmaps", ns, n, "(an adoption each)")
}
