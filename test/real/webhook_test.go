//go:build real

package real_test

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/initlock/initlock/internal/kubeenv"
	"github.com/initlock/initlock/internal/kubeenv/stack"
	"github.com/initlock/initlock/internal/kubeenv/wire"
	"github.com/initlock/initlock/pkg/initlock"
	"github.com/initlock/initlock/pkg/initlock/capi"
)

// freePathRuns is how many Locks and raw Creates each half measures.
const freePathRuns = 20

// freePath times, on fresh Clusters, initlock's Lock of a free lock (which
// writes the grant register on the Cluster and creates the lock), a raw
// Create of a ConfigMap, and the requests of the upstream lock's free Lock
// (a GET of the lock, not found, then its create: hack/contention's
// BenchmarkFreeLockVsUpstream asserts that CABPK v1.14.2's makes exactly
// these two), freePathRuns times each, and checks that every Lock was
// granted and left its grant on the Cluster.
func freePath(t *testing.T, ns, label string) (lock, raw, upstream []time.Duration) {
	t.Helper()
	ctx := t.Context()
	locker := initlock.New(source.Client)
	for i := range freePathRuns {
		name := fmt.Sprintf("fp-%s-%d", label, i)
		// The Cluster webhook wants an infrastructure reference; nothing
		// provisions it, so core leaves the Cluster alone.
		cluster := kubeenv.NewCluster(capi.V1Beta2, ns, name)
		cluster.Object["spec"].(map[string]any)["infrastructureRef"] = map[string]any{
			"apiGroup": stack.InfraGroup, "kind": "LocalCluster", "name": name,
		}
		must(t, source.Client.Create(ctx, cluster))
		machine := kubeenv.NewMachine(capi.V1Beta2, ns, name, name+"-cp-0")
		must(t, source.Client.Create(ctx, machine))

		start := time.Now()
		res, err := locker.Lock(ctx, cluster, machine)
		lock = append(lock, time.Since(start))
		if err != nil || !res.Acquired {
			t.Fatalf("Lock of %s with %s: %+v, %v", name, label, res, err)
		}
		u, err := source.Get(ctx, stack.ClusterGVK, ns, name)
		must(t, err)
		if u.GetAnnotations()[wire.GrantAnnotation] == "" {
			t.Fatalf("cluster %s has no grant register after Lock with %s", name, label)
		}

		cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "fp-raw-" + name}}
		start = time.Now()
		must(t, source.Client.Create(ctx, cm))
		raw = append(raw, time.Since(start))

		up := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "fp-up-" + name}}
		start = time.Now()
		if err := source.Client.Get(ctx, client.ObjectKeyFromObject(up), &corev1.ConfigMap{}); !apierrors.IsNotFound(err) {
			t.Fatalf("the upstream-shaped lock %s exists before its create: %v", up.Name, err)
		}
		must(t, source.Client.Create(ctx, up))
		upstream = append(upstream, time.Since(start))
	}
	return lock, raw, upstream
}

func median(ds []time.Duration) time.Duration {
	s := slices.Clone(ds)
	slices.Sort(s)
	return s[len(s)/2]
}

// clusterHooks sums the admission requests the Cluster webhooks answered,
// by code.
func clusterHooks(t *testing.T) map[string]float64 {
	t.Helper()
	reqs, err := source.WebhookRequests(t.Context())
	must(t, err)
	out := map[string]float64{}
	for k, v := range reqs {
		if strings.HasSuffix(strings.Fields(k)[0], "-v1beta2-cluster") {
			out[strings.Fields(k)[1]] += v
		}
	}
	return out
}

// TestWebhooksFreePath shows that CAPI core's Cluster webhooks, registered
// for real, accept the grant register's writes (Lock patches an annotation
// on the Cluster with a JSON patch), and measures what they add to the free
// path: Lock against a raw ConfigMap Create and against the upstream lock's
// free Lock (which writes no Cluster, so the webhooks are not in its path),
// without and with the webhooks, in one run. Times are reported, not
// asserted.
func TestWebhooksFreePath(t *testing.T) {
	ns := source.Env.Namespace(t)
	must(t, source.UnregisterWebhooks(t.Context()))
	t.Cleanup(func() {
		if err := source.RegisterWebhooks(context.WithoutCancel(t.Context())); err != nil {
			t.Error(err)
		}
	})
	// Let the API server drop the configurations from its cache.
	time.Sleep(2 * time.Second)
	before := clusterHooks(t)
	lockPlain, rawPlain, upPlain := freePath(t, ns, "plain")
	if after := clusterHooks(t); after["200"] != before["200"] {
		t.Fatalf("the Cluster webhooks were called without being registered: %v, then %v", before, after)
	}

	must(t, source.RegisterWebhooks(t.Context()))
	time.Sleep(2 * time.Second)
	before = clusterHooks(t)
	lockHooks, rawHooks, upHooks := freePath(t, ns, "webhooks")
	after := clusterHooks(t)
	accepted := after["200"] - before["200"]
	// Each Lock writes the Cluster once; creating each Cluster goes
	// through the webhooks too.
	if accepted < 2*freePathRuns {
		t.Errorf("the Cluster webhooks accepted %v requests for %d Clusters and Locks: %v, then %v", accepted, freePathRuns, before, after)
	}
	for code, n := range after {
		if code != "200" && n != before[code] {
			t.Errorf("the Cluster webhooks answered %v requests with %s", n-before[code], code)
		}
	}
	ms := func(ds []time.Duration) time.Duration { return median(ds).Round(10 * time.Microsecond) }
	result(t, "webhooks on the free path, median of %d: without webhooks Lock %s, raw Create %s (ratio %.1f), upstream's GET and create %s (ratio %.2f, target 1.2); "+
		"with CAPI core's and CABPK's webhooks Lock %s, raw Create %s (ratio %.1f), upstream's GET and create %s (ratio %.2f, target 1.2); "+
		"the Cluster webhooks accepted %v requests during the %d Locks and Cluster creations, refused none",
		freePathRuns, ms(lockPlain), ms(rawPlain), ratio(lockPlain, rawPlain), ms(upPlain), ratio(lockPlain, upPlain),
		ms(lockHooks), ms(rawHooks), ratio(lockHooks, rawHooks), ms(upHooks), ratio(lockHooks, upHooks),
		accepted, freePathRuns)
}

func ratio(a, b []time.Duration) float64 { return float64(median(a)) / float64(median(b)) }
