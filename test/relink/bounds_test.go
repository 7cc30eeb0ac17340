package relinksuite

import (
	"fmt"
	"testing"
	"time"

	testingclock "k8s.io/utils/clock/testing"
	ctrlmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"

	"github.com/initlock/initlock/internal/kubeenv"
	"github.com/initlock/initlock/internal/relink"
)

// reconciles returns how many reconciles the relink controllers of the
// process have made.
func reconciles(t *testing.T) float64 {
	t.Helper()
	n, _, err := gathered(ctrlmetrics.Registry, "controller_runtime_reconcile_total", map[string]string{"controller": relink.ControllerName})
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// TestUnknownKindsAskDiscoveryOncePerRetryPeriod: an object whose
// annotation names 2,000 kinds the API server does not serve is looked at
// again and again while it waits; the relinker asks the API server's
// discovery about them once per DiscoveryRetry (two requests, /api and
// /apis), not on every retry, and reads nothing else.
func TestUnknownKindsAskDiscoveryOncePerRetryPeriod(t *testing.T) {
	ns := env.Namespace(t)
	clock := testingclock.NewFakeClock(time.Now())
	h := start(t, ns, relink.Options{Clock: clock, MinBackoff: 10 * time.Millisecond, MaxBackoff: 50 * time.Millisecond})
	owners := make([]relink.OwnerRef, 2000)
	for i := range owners {
		owners[i] = relink.OwnerRef{APIVersion: fmt.Sprintf("g%02d.example.invalid/v1", i%100), Kind: fmt.Sprintf("Kind%04d", i), Name: "o"}
	}
	h.rm.Counter.Reset()
	create(t, restoredConfigMap(t, ns, "many-kinds", "c1", owners...))

	retries := func(n float64) {
		t.Helper()
		base := reconciles(t)
		kubeenv.Eventually(t, 30*time.Second, func() error {
			if got := reconciles(t) - base; got < n {
				return fmt.Errorf("%v reconciles", got)
			}
			return nil
		})
	}
	retries(10)
	if n, all := h.rm.Counter.Count("discovery"), h.rm.Counter.Count("get", "list", "discovery"); n != 0 || all != 0 {
		t.Fatalf("%d discovery requests and %d reads within DiscoveryRetry of the start, want none:\n%s", n, all, h.rm.Counter)
	}
	clock.Step(relink.DiscoveryRetry)
	retries(10)
	if n, all := h.rm.Counter.Count("discovery"), h.rm.Counter.Count("get", "list", "discovery"); n != 2 || all != 2 {
		t.Fatalf("%d discovery requests and %d reads after DiscoveryRetry, want one snapshot (2 requests) and nothing else:\n%s", n, all, h.rm.Counter)
	}
	if w := h.relinker.Waiting(); len(w) != 1 {
		t.Fatalf("waiting = %v", w)
	}
}

// TestOwnerReadsAreBatched: 200 restored ConfigMaps wait for their Cluster;
// once it is restored, each is linked after a live read of the Cluster,
// but they share the reads: at most one per ConfirmFor. A ConfigMap first
// seen after the last read is linked only after a read of its own.
func TestOwnerReadsAreBatched(t *testing.T) {
	ns := env.Namespace(t)
	h := start(t, ns, relink.Options{MinBackoff: time.Hour})
	const n = 200
	for i := range n {
		create(t, restoredConfigMap(t, ns, fmt.Sprintf("cm-%03d", i), "c1", clusterOwner("c1")))
	}
	h.waitMetric(t, 30*time.Second, relink.WaitingMetric, n)
	h.rm.Counter.Reset()
	began := time.Now()
	cluster := create(t, restored(t, kubeenv.NewCluster(env.CAPIVersion, ns, "c1")))
	h.waitMetric(t, 30*time.Second, relink.LinkedMetric, n)
	elapsed := time.Since(began)
	reads := h.rm.Counter.Of("clusters", ns).Count("get")
	if most := 1 + int(elapsed/relink.ConfirmFor); reads < 1 || reads > most {
		t.Fatalf("%d live reads of the Cluster for %d ConfigMaps in %s, want 1 to %d", reads, n, elapsed, most)
	}
	t.Logf("%d ConfigMaps linked in %s with %d live reads of their Cluster", n, elapsed.Round(time.Millisecond), reads)

	create(t, restoredConfigMap(t, ns, "late", "c1", clusterOwner("c1")))
	kubeenv.Eventually(t, 10*time.Second, linked(t, configMapGVK, ns, "late", refTo(cluster, false)))
	if got := h.rm.Counter.Of("clusters", ns).Count("get") - reads; got != 1 {
		t.Fatalf("%d live reads for a ConfigMap first seen after the last read, want 1", got)
	}
}
