package bench

import (
	"context"
	"flag"
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/selection"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/config"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/initlock/initlock/internal/benchreport/loadavg"
	"github.com/initlock/initlock/internal/kubeenv"
	"github.com/initlock/initlock/internal/kubeenv/wire"
	"github.com/initlock/initlock/internal/manager"
	"github.com/initlock/initlock/pkg/initlock/capi"
	"github.com/initlock/initlock/test/managertest"
)

var (
	scaleClusters = flag.Int("scale.clusters", 10000, "Clusters, each with a held lock, in the start-up benchmark.")
	scaleMachines = flag.Int("scale.machines", 3, "Machines per Cluster in the start-up benchmark.")
)

// startup is what one manager's start over the benchmark's objects cost.
type startup struct {
	heap, rss                 uint64
	firstReconcile, allChecks time.Duration
}

// BenchmarkStartupAtScale creates scale.clusters Clusters with
// scale.machines Machines each and a held lock each, then starts, one after
// the other in this process, a bare controller-runtime manager (a
// controller over Clusters that does nothing, watching lock ConfigMaps and
// Machine metadata with the initlock manager's cache options), the
// initlock manager, and the bare manager again; the first bare run warms
// the process up and is not reported. For each it measures the heap and
// the resident memory it adds once every Cluster was reconciled (after a
// forced collection), the time from its start to its first reconcile, and
// to every Cluster's lock checked. It reports both, the heap ratio (target
// ≤ 1.2) and asserts that the initlock manager wrote nothing.
func BenchmarkStartupAtScale(b *testing.B) {
	defer loadavg.Record(b)()
	n := *scaleClusters
	ns := env.Namespace(b)
	created := time.Now()
	m := *scaleMachines
	createHealthy(b, ns, n, m)
	b.Logf("start-up at scale: created %d Clusters, %d Machines and %d locks in %s", n, n*m, n, time.Since(created).Round(time.Second))

	runBare(b, ns, n) // warm-up
	il := runInitlock(b, ns, n)
	bare := runBare(b, ns, n)

	mib := func(v uint64) float64 { return float64(v) / (1 << 20) }
	b.ReportMetric(mib(il.heap), "heap-MiB")
	b.ReportMetric(mib(bare.heap), "bare-heap-MiB")
	b.ReportMetric(float64(il.heap)/float64(bare.heap), "heap-ratio")
	b.ReportMetric(mib(il.rss), "rss-MiB")
	b.ReportMetric(mib(bare.rss), "bare-rss-MiB")
	b.ReportMetric(il.firstReconcile.Seconds(), "first-reconcile-s")
	b.ReportMetric(bare.firstReconcile.Seconds(), "bare-first-reconcile-s")
	b.ReportMetric(il.allChecks.Seconds(), "all-checked-s")
	b.ReportMetric(bare.allChecks.Seconds(), "bare-all-checked-s")
	b.Logf("start-up at scale: initlock %+v, bare %+v", il, bare)
}

// runInitlock starts the initlock manager over ns and measures it.
func runInitlock(b *testing.B, ns string, n int) startup {
	b.Helper()
	before, rss0 := heap(), rss(b)
	r0 := reconciled(b)
	start := time.Now()
	rm := managertest.StartNoWait(b, env.Config, managertest.Options(ns))
	var s startup
	waitFor(b, 30*time.Minute, func() bool {
		r := reconciled(b) - r0
		if r > 0 && s.firstReconcile == 0 {
			s.firstReconcile = time.Since(start)
		}
		return r >= float64(n)
	})
	s.allChecks = time.Since(start)
	time.Sleep(time.Second)
	s.heap, s.rss = grown(before, heap()), grown(rss0, rss(b))
	if w := rm.Counter.Writes(); w != 0 {
		b.Fatalf("the manager made %d writes over healthy locks:\n%s", w, rm.Counter)
	}
	rm.Stop()
	return s
}

// runBare starts a bare controller-runtime manager over ns, with the
// initlock manager's cache options and watches, and measures it.
func runBare(b *testing.B, ns string, n int) startup {
	b.Helper()
	before, rss0 := heap(), rss(b)
	start := time.Now()
	var reconciles atomic.Int64
	var first atomic.Int64
	rm := kubeenv.StartManager(b, env.Config, func(cfg *rest.Config) (ctrl.Manager, error) {
		return bareManager(cfg, ns, func() {
			if reconciles.Add(1) == 1 {
				first.Store(int64(time.Since(start)))
			}
		})
	})
	waitFor(b, 30*time.Minute, func() bool { return reconciles.Load() >= int64(n) })
	s := startup{allChecks: time.Since(start), firstReconcile: time.Duration(first.Load())}
	time.Sleep(time.Second)
	s.heap, s.rss = grown(before, heap()), grown(rss0, rss(b))
	rm.Stop()
	if err := rm.Err(); err != nil {
		b.Fatalf("bare manager: %v", err)
	}
	return s
}

// bareManager is a controller-runtime manager whose cache is configured as
// the initlock manager's (see manager.New) and whose one controller
// reconciles Clusters by calling reconciled, watching lock ConfigMaps and
// Machine metadata without mapping them to anything.
func bareManager(cfg *rest.Config, ns string, reconciled func()) (ctrl.Manager, error) {
	lockLabel, err := labels.NewRequirement(wire.ClusterNameLabel, selection.Exists, nil)
	if err != nil {
		return nil, fmt.Errorf("the lock label selector: %w", err)
	}
	mgr, err := ctrl.NewManager(cfg, ctrl.Options{
		Scheme: manager.Scheme(),
		Cache: cache.Options{
			ReaderFailOnMissingInformer: true,
			DefaultTransform:            cache.TransformStripManagedFields(),
			ByObject:                    map[client.Object]cache.ByObject{&corev1.ConfigMap{}: {Label: labels.NewSelector().Add(*lockLabel)}},
			DefaultNamespaces:           map[string]cache.Config{ns: {}},
		},
		Client:                 client.Options{Cache: &client.CacheOptions{Unstructured: true}},
		Logger:                 logr.Discard(),
		Metrics:                metricsserver.Options{BindAddress: "0"},
		HealthProbeBindAddress: "0",
		Controller:             config.Controller{SkipNameValidation: ptr.To(true)},
	})
	if err != nil {
		return nil, fmt.Errorf("building the bare manager: %w", err)
	}
	cluster := &unstructured.Unstructured{}
	cluster.SetGroupVersionKind(capi.ClusterGVK(v))
	machine := &metav1.PartialObjectMetadata{}
	machine.SetGroupVersionKind(capi.MachineGVK(v))
	none := handler.EnqueueRequestsFromMapFunc(func(context.Context, client.Object) []reconcile.Request { return nil })
	err = ctrl.NewControllerManagedBy(mgr).Named("bare").For(cluster).
		Watches(&corev1.ConfigMap{}, none).
		WatchesMetadata(machine, none).
		Complete(reconcile.Func(func(context.Context, reconcile.Request) (reconcile.Result, error) {
			reconciled()
			return reconcile.Result{}, nil
		}))
	if err != nil {
		return nil, fmt.Errorf("building the bare controller: %w", err)
	}
	return mgr, nil
}

func grown(before, after uint64) uint64 {
	if after < before {
		return 0
	}
	return after - before
}

// rss is the resident memory of this process, from /proc/self/status.
func rss(b *testing.B) uint64 {
	b.Helper()
	raw, err := os.ReadFile("/proc/self/status")
	if err != nil {
		b.Fatal(err)
	}
	for _, line := range strings.Split(string(raw), "\n") {
		if rest, ok := strings.CutPrefix(line, "VmRSS:"); ok {
			f := strings.Fields(rest)
			kib, err := strconv.ParseUint(f[0], 10, 64)
			if err != nil {
				b.Fatal(err)
			}
			return kib << 10
		}
	}
	b.Fatal("no VmRSS in /proc/self/status")
	return 0
}
