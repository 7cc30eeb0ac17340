package bench

import (
	"flag"
	"fmt"
	"os"
	"runtime"
	"runtime/debug"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/initlock/initlock/internal/benchreport/loadavg"
	"github.com/initlock/initlock/internal/kubeenv"
	"github.com/initlock/initlock/internal/kubeenv/velerosim"
	"github.com/initlock/initlock/internal/kubeenv/wire"
	"github.com/initlock/initlock/pkg/initlock/capi"
	"github.com/initlock/initlock/test/managertest"
)

var (
	stormClusters = flag.Int("storm.clusters", 2000, "Clusters restored in the restore-storm benchmark.")
	stormQPS      = flag.Float64("storm.qps", -1, "Client QPS of the manager and of the raw patch loop; negative: no client rate limit.")
	stormBurst    = flag.Int("storm.burst", 100, "Client burst of the manager and of the raw patch loop, with a positive storm.qps.")
	steadyN       = flag.Int("steady.clusters", 2000, "Healthy Clusters in the steady-state benchmark.")
	steadyFor     = flag.Duration("steady.duration", 60*time.Second, "Length of the steady period.")
	steadySync    = flag.Duration("steady.sync-period", 20*time.Second, "Resync period of the manager during the steady period.")
	memConfigMaps = flag.Int("memory.configmaps", 20000, "Unrelated ConfigMaps in the memory benchmark.")
	memClusters   = flag.Int("memory.clusters", 200, "Clusters with locks in both runs of the memory benchmark.")
)

var env *kubeenv.Env

// TestMain starts a control plane only when benchmarks run: plain go test
// stays fast.
func TestMain(m *testing.M) {
	flag.Parse()
	if f := flag.Lookup("test.bench"); f == nil || f.Value.String() == "" {
		os.Exit(m.Run())
	}
	// The lock guard, as installed: without it the manager reports it
	// missing (a Warning event, a write).
	kubeenv.Main(m, kubeenv.Options{CAPI: kubeenv.CAPIV1Beta2, LockGuard: true}, &env)
}

const v = capi.V1Beta2

// BenchmarkRestoreStorm restores storm.clusters Clusters whose locks lost
// their ownerReferences (velerosim: ConfigMaps, then Machines, then
// Clusters), then measures, with the same client limits (none by default,
// storm.qps otherwise):
//
//   - manager: from the start of a manager to every lock re-adopted
//     (cache sync, reconciles, patches);
//   - raw: a client that lists the Clusters and the locks and patches each
//     lock, the least any tool can do.
//
// It reports both times and their ratio, the requests the API server
// served meanwhile per lock (its own apiserver_request_total, every
// client included), the CPU time of this process meanwhile (the manager,
// or the patch loop, and the benchmark's polling), and the manager's
// ConfigMap writes per lock, which it asserts to be exactly 1.
func BenchmarkRestoreStorm(b *testing.B) {
	defer loadavg.Record(b)()
	n := *stormClusters
	cfg := stormConfig()

	// Raw patch loop.
	rawNS := env.Namespace(b)
	restoreUnowned(b, rawNS, n)
	raw, err := client.New(cfg, client.Options{Scheme: env.Client.Scheme()})
	if err != nil {
		b.Fatal(err)
	}
	rawUse := startUsage(b)
	patchAll(b, raw, rawNS, n)
	rawTime, rawReqs, rawCPU := rawUse(b)
	verifyOwned(b, rawNS, n)

	// Manager.
	mgrNS := env.Namespace(b)
	restoreUnowned(b, mgrNS, n)
	adopted0 := managertest.MetricValue(b, "initlock_lock_adoptions_total")
	mgrUse := startUsage(b)
	rm := managertest.StartNoWait(b, cfg, managertest.Options(mgrNS))
	waitFor(b, 30*time.Minute, func() bool {
		return managertest.MetricValue(b, "initlock_lock_adoptions_total")-adopted0 >= float64(n)
	})
	mgrTime, mgrReqs, mgrCPU := mgrUse(b)
	time.Sleep(2 * time.Second) // let any stray write show
	verifyOwned(b, mgrNS, n)
	writes := rm.Counter.Of("configmaps", mgrNS).Writes()
	rm.Stop()
	b.Logf("restore storm: the manager's requests:\n%s", rm.Counter)

	b.ReportMetric(rawTime.Seconds(), "raw-s")
	b.ReportMetric(mgrTime.Seconds(), "manager-s")
	b.ReportMetric(mgrTime.Seconds()/rawTime.Seconds(), "ratio")
	b.ReportMetric(float64(writes)/float64(n), "writes/lock")
	b.ReportMetric(mgrReqs.all/float64(n), "apiserver-req/lock")
	b.ReportMetric(rawReqs.all/float64(n), "raw-apiserver-req/lock")
	b.ReportMetric(mgrReqs.writes/float64(n), "apiserver-writes/lock")
	b.ReportMetric(mgrReqs.configMapWrites/float64(n), "apiserver-cm-writes/lock")
	b.ReportMetric(mgrCPU.Seconds(), "manager-cpu-s")
	b.ReportMetric(rawCPU.Seconds(), "raw-cpu-s")
	b.Logf("restore storm: %d locks, %s: raw patch loop %s (%.0f API requests, %s CPU), manager %s (%.0f API requests, %s CPU), ratio %.2f, manager configmap writes %d",
		n, limits(cfg), rawTime.Round(time.Millisecond), rawReqs.all, rawCPU.Round(time.Millisecond), mgrTime.Round(time.Millisecond), mgrReqs.all,
		mgrCPU.Round(time.Millisecond), mgrTime.Seconds()/rawTime.Seconds(), writes)
	if writes != n {
		b.Fatalf("the manager made %d ConfigMap writes for %d locks, want exactly one each:\n%s", writes, n, rm.Counter)
	}
}

// BenchmarkRestoreWhileRunning restores storm.clusters Clusters in
// Velero's order while the manager runs, so that every lock is first seen
// without its Cluster: it reports the ConfigMap writes per lock (target
// exactly 1: the orphan settle time spares the cluster-absent mark when
// the restore takes less than it), the absence marks per lock among them,
// and the time from the first Cluster created to every lock re-adopted.
func BenchmarkRestoreWhileRunning(b *testing.B) {
	defer loadavg.Record(b)()
	n := *stormClusters
	ns := env.Namespace(b)
	rm := managertest.Start(b, stormConfig(), managertest.Options(ns))
	adopted0 := managertest.MetricValue(b, "initlock_lock_adoptions_total")
	marked0 := managertest.MetricValue(b, "initlock_lock_absence_marks_total")
	restore(b, lockedMachines(ns, n)...)
	start := time.Now()
	restore(b, clustersOf(ns, n)...)
	waitFor(b, 10*time.Minute, func() bool {
		return managertest.MetricValue(b, "initlock_lock_adoptions_total")-adopted0 >= float64(n)
	})
	elapsed := time.Since(start)
	time.Sleep(2 * time.Second)
	verifyOwned(b, ns, n)
	writes := rm.Counter.Of("configmaps", ns).Writes()
	rm.Stop()
	b.ReportMetric(elapsed.Seconds(), "s-from-first-cluster")
	marked := managertest.MetricValue(b, "initlock_lock_absence_marks_total") - marked0
	b.ReportMetric(float64(writes)/float64(n), "writes/lock")
	b.ReportMetric(marked/float64(n), "absence-marks/lock")
	b.Logf("restore while running: %d locks, configmap writes %d (%.0f absence marks), all adopted %s after the first Cluster",
		n, writes, marked, elapsed.Round(time.Millisecond))
}

// BenchmarkSteadyState runs the manager over steady.clusters healthy
// Clusters for steady.duration, with a resync every steady.sync-period, and
// reports the requests it made in that time (target: zero writes).
func BenchmarkSteadyState(b *testing.B) {
	defer loadavg.Record(b)()
	n := *steadyN
	ns := env.Namespace(b)
	createHealthy(b, ns, n, 1)
	opts := managertest.Options(ns)
	opts.SyncPeriod = *steadySync
	reconciled0 := reconciled(b)
	rm := managertest.Start(b, env.Config, opts)
	waitFor(b, 5*time.Minute, func() bool {
		return reconciled(b)-reconciled0 >= float64(n)
	})
	time.Sleep(2 * time.Second)
	if w := rm.Counter.Writes(); w != 0 {
		b.Fatalf("%d writes to healthy locks at start:\n%s", w, rm.Counter)
	}
	rm.Counter.Reset()
	reconciled1 := reconciled(b)
	time.Sleep(*steadyFor)
	reconciles := reconciled(b) - reconciled1
	writes := rm.Counter.Writes()
	reads := rm.Counter.Reads()
	rm.Stop()
	b.ReportMetric(float64(writes), "writes")
	b.ReportMetric(float64(reads), "reads")
	b.ReportMetric(reconciles, "reconciles")
	b.Logf("steady state: %d healthy clusters for %s (resync every %s): %.0f reconciles, %d writes, %d reads",
		n, *steadyFor, *steadySync, reconciles, writes, reads)
	if writes != 0 {
		b.Errorf("%d writes in the steady period:\n%s", writes, rm.Counter)
	}
}

// BenchmarkMemoryUnrelatedConfigMaps measures the heap the manager adds to
// the process (HeapAlloc after a forced GC, manager running and synced,
// minus the same before it started) over memory.clusters Clusters with
// locks, first alone, then with memory.configmaps unrelated ConfigMaps in
// the watched namespace. A warm-up manager runs first, so that one-time
// allocations of the process are in the baseline. Target ratio <= 1.1.
func BenchmarkMemoryUnrelatedConfigMaps(b *testing.B) {
	defer loadavg.Record(b)()
	ns := env.Namespace(b)
	createHealthy(b, ns, *memClusters, 1)
	opts := managertest.Options(ns)

	measure := func() uint64 {
		before := heap()
		rm := managertest.Start(b, env.Config, opts)
		reconciled0 := reconciled(b)
		waitFor(b, 5*time.Minute, func() bool {
			return reconciled(b)-reconciled0 >= float64(*memClusters)
		})
		time.Sleep(time.Second)
		after := heap()
		runtime.KeepAlive(rm)
		rm.Stop()
		return grown(before, after)
	}
	measure() // warm-up
	none := measure()

	createAll(b, *memConfigMaps, func(i int) client.Object {
		return &corev1.ConfigMap{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: fmt.Sprintf("unrelated-%05d", i),
				Labels: map[string]string{"app": "unrelated"}},
			Data: map[string]string{"config": strings.Repeat("x", 1024)},
		}
	})
	with := measure()
	ratio := float64(with) / float64(none)
	b.ReportMetric(float64(none)/(1<<20), "MiB-none")
	b.ReportMetric(float64(with)/(1<<20), "MiB-with")
	b.ReportMetric(ratio, "ratio")
	b.Logf("memory: manager heap over %d clusters: %.1f MiB alone, %.1f MiB with %d unrelated ConfigMaps: ratio %.3f",
		*memClusters, float64(none)/(1<<20), float64(with)/(1<<20), *memConfigMaps, ratio)
}

// heap returns the live heap after a full collection.
func heap() uint64 {
	runtime.GC()
	debug.FreeOSMemory()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return ms.HeapAlloc
}

func name(i int) string { return fmt.Sprintf("c%05d", i) }

// restoreUnowned restores n locks without ownerReferences, their holder
// Machines and their Clusters, in that order.
func restoreUnowned(b *testing.B, ns string, n int) {
	restore(b, append(lockedMachines(ns, n), clustersOf(ns, n)...)...)
}

// lockedMachines are n locks without ownerReferences and their holder
// Machines, as backed up.
func lockedMachines(ns string, n int) []client.Object {
	objs := make([]client.Object, 0, 2*n)
	for i := range n {
		objs = append(objs, kubeenv.NewLock(ns, name(i), name(i)+"-cp-0", nil), kubeenv.NewMachine(v, ns, name(i), name(i)+"-cp-0"))
	}
	return objs
}

// clustersOf are the n Clusters of lockedMachines, as backed up.
func clustersOf(ns string, n int) []client.Object {
	objs := make([]client.Object, n)
	for i := range objs {
		objs[i] = kubeenv.NewCluster(v, ns, name(i))
	}
	return objs
}

// restore restores objs as a Velero restore does (velerosim), with 32
// objects of a kind created at once, as createAll creates them.
func restore(b *testing.B, objs ...client.Object) {
	b.Helper()
	velerosim.Restore(b, env.Config, velerosim.Options{Workers: 32}, objs...)
}

// createHealthy creates n Clusters with m Machines each and a lock the
// first one holds, owned by the Cluster, as the manager keeps it.
func createHealthy(b *testing.B, ns string, n, m int) {
	clusters := make([]*unstructured.Unstructured, n)
	createAll(b, n, func(i int) client.Object {
		clusters[i] = kubeenv.NewCluster(v, ns, name(i))
		return clusters[i]
	})
	createAll(b, n*m, func(i int) client.Object {
		return kubeenv.NewMachine(v, ns, name(i/m), name(i/m)+"-cp-"+strconv.Itoa(i%m))
	})
	createAll(b, n, func(i int) client.Object { return kubeenv.NewLock(ns, name(i), name(i)+"-cp-0", clusters[i]) })
}

// createAll creates n objects with the admin client, 32 at a time.
func createAll(b *testing.B, n int, obj func(int) client.Object) {
	b.Helper()
	var next atomic.Int64
	var wg sync.WaitGroup
	errs := make(chan error, 32)
	for range 32 {
		wg.Go(func() {
			for {
				i := int(next.Add(1) - 1)
				if i >= n {
					return
				}
				o := obj(i)
				if err := env.Client.Create(b.Context(), o); err != nil {
					errs <- fmt.Errorf("creating %s: %w", o.GetName(), err)
					return
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		b.Fatal(err)
	}
}

// patchAll lists the Clusters and the locks of ns and points each lock at
// its Cluster, as the manager does: one merge patch with the
// resourceVersion read.
func patchAll(b *testing.B, c client.Client, ns string, n int) {
	b.Helper()
	var clusters unstructured.UnstructuredList
	clusters.SetGroupVersionKind(capi.ClusterGVK(v).GroupVersion().WithKind("ClusterList"))
	if err := c.List(b.Context(), &clusters, client.InNamespace(ns)); err != nil {
		b.Fatal(err)
	}
	var locks corev1.ConfigMapList
	if err := c.List(b.Context(), &locks, client.InNamespace(ns), client.HasLabels{wire.ClusterNameLabel}); err != nil {
		b.Fatal(err)
	}
	uids := map[string]metav1.OwnerReference{}
	for _, cl := range clusters.Items {
		uids[cl.GetName()] = metav1.OwnerReference{APIVersion: cl.GetAPIVersion(), Kind: cl.GetKind(), Name: cl.GetName(), UID: cl.GetUID()}
	}
	if len(locks.Items) != n || len(uids) != n {
		b.Fatalf("found %d locks and %d clusters, want %d", len(locks.Items), len(uids), n)
	}
	for i := range locks.Items {
		cm := &locks.Items[i]
		next := cm.DeepCopy()
		next.OwnerReferences = []metav1.OwnerReference{uids[cm.Labels[wire.ClusterNameLabel]]}
		if err := c.Patch(b.Context(), next, client.MergeFromWithOptions(cm, client.MergeFromWithOptimisticLock{})); err != nil {
			b.Fatal(err)
		}
	}
}

// verifyOwned checks that every lock in ns is owned by a Cluster.
func verifyOwned(b *testing.B, ns string, n int) {
	b.Helper()
	var locks corev1.ConfigMapList
	if err := env.Client.List(b.Context(), &locks, client.InNamespace(ns), client.HasLabels{wire.ClusterNameLabel}); err != nil {
		b.Fatal(err)
	}
	owned := 0
	for _, cm := range locks.Items {
		if len(cm.OwnerReferences) == 1 && cm.OwnerReferences[0].UID != "" {
			owned++
		}
	}
	if owned != n {
		b.Fatalf("%d of %d locks owned", owned, n)
	}
}

func waitFor(b *testing.B, timeout time.Duration, cond func() bool) {
	b.Helper()
	deadline := time.Now().Add(timeout)
	for !cond() {
		if time.Now().After(deadline) {
			b.Fatalf("not done within %s", timeout)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// reconciled is the count of the initlock controller's successful
// reconciles.
func reconciled(b *testing.B) float64 {
	return managertest.MetricValue(b, "controller_runtime_reconcile_total", "controller=initlock", "result=success")
}
