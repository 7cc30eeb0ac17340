package relinksuite

import (
	"encoding/json"
	"flag"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/initlock/initlock/internal/benchreport/loadavg"
	"github.com/initlock/initlock/internal/kubeenv"
	"github.com/initlock/initlock/internal/kubeenv/velerosim"
	"github.com/initlock/initlock/internal/relink"
	"github.com/initlock/initlock/pkg/initlock/capi"
)

var benchObjects = flag.Int("relink.objects", 10000, "Restored ConfigMaps the relinker benchmark links.")

const benchWorkers = 4

// unthrottled is the admin rest.Config without a client rate limit: the
// benchmark measures the relinker and the API server, not a limiter.
func unthrottled() *rest.Config {
	cfg := rest.CopyConfig(env.Config)
	cfg.QPS, cfg.Burst = -1, 0
	return cfg
}

// restoreConfigMaps restores n ConfigMaps of Cluster c1 as a Velero
// restore with initlock's plugin does (velerosim, with 16 created at once),
// and returns their resourceVersions by name.
func restoreConfigMaps(b *testing.B, ns string, n int) map[string]string {
	b.Helper()
	backed := make([]*unstructured.Unstructured, n)
	for i := range backed {
		backed[i] = backedUpConfigMap(ns, fmt.Sprintf("cm-%05d", i), "c1", clusterOwner("c1"))
	}
	rvs := make(map[string]string, n)
	for _, cm := range velerosim.Restore(b, env.Config, velerosim.Options{Workers: 16, Actions: pluginActions()}, backed...) {
		rvs[cm.GetName()] = cm.GetResourceVersion()
	}
	return rvs
}

// parallel runs f(0..n-1) on workers goroutines, each taking the next
// index from a shared counter, failing b at the first error.
func parallel(b *testing.B, n, workers int, f func(int) error) {
	b.Helper()
	var next atomic.Int64
	errs := make(chan error, workers)
	var wg sync.WaitGroup
	for range workers {
		wg.Go(func() {
			for i := int(next.Add(1) - 1); i < n; i = int(next.Add(1) - 1) {
				if err := f(i); err != nil {
					errs <- err
					next.Store(int64(n))
					return
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	if err := <-errs; err != nil {
		b.Fatal(err)
	}
}

// BenchmarkRelink relinks relink.objects restored ConfigMaps (10,000 by
// default) to their Cluster, and, in the same run, links as many with a raw
// loop of merge patches that knows every UID and resourceVersion
// beforehand and reads nothing. Both use 4 workers and no client rate
// limit. The relinker is running while
// the ConfigMaps are restored, as in a Velero restore, and its time runs
// from the moment the Cluster is restored until the last ConfigMap is
// linked; the raw loop's ConfigMaps are deleted before it starts, so that
// etcd holds as many objects in both runs. Reported: seconds and ns per
// object for each, their ratio, the relinker's patches per object, which
// it asserts to be exactly 1, and its live reads of the Cluster per object
// (each owner UID is read live before it is written, one read shared by
// every object that asked while the previous read was in flight).
func BenchmarkRelink(b *testing.B) {
	defer loadavg.Record(b)()
	n := *benchObjects
	// One iteration takes minutes, far over the default -benchtime, so
	// the benchmark runs it once; ns/op includes creating the objects.
	for b.Loop() {
		raw := benchRawPatchLoop(b, n)
		rel, patches, ownerReads := benchRelinker(b, n)
		b.ReportMetric(raw.Seconds(), "raw-s")
		b.ReportMetric(rel.Seconds(), "relink-s")
		b.ReportMetric(float64(raw.Nanoseconds())/float64(n), "raw-ns/object")
		b.ReportMetric(float64(rel.Nanoseconds())/float64(n), "relink-ns/object")
		b.ReportMetric(rel.Seconds()/raw.Seconds(), "ratio")
		b.ReportMetric(float64(patches)/float64(n), "patches/object")
		b.ReportMetric(float64(ownerReads)/float64(n), "owner-reads/object")
		if patches != n {
			b.Fatalf("the relinker made %d patches for %d objects, want exactly one each", patches, n)
		}
	}
}

func benchRawPatchLoop(b *testing.B, n int) time.Duration {
	ns := env.Namespace(b)
	cluster := kubeenv.NewCluster(env.CAPIVersion, ns, "c1")
	if err := env.Client.Create(b.Context(), cluster); err != nil {
		b.Fatal(err)
	}
	rvs := restoreConfigMaps(b, ns, n)
	refs := []metav1.OwnerReference{refTo(cluster, false)}
	raw, err := client.New(unthrottled(), client.Options{Scheme: env.Client.Scheme()})
	if err != nil {
		b.Fatal(err)
	}
	start := time.Now()
	parallel(b, n, benchWorkers, func(i int) error {
		name := fmt.Sprintf("cm-%05d", i)
		body, err := json.Marshal(map[string]any{"metadata": map[string]any{
			"resourceVersion": rvs[name],
			"ownerReferences": refs,
			"annotations":     map[string]any{relink.Annotation: nil},
		}})
		if err != nil {
			return err
		}
		target := &metav1.PartialObjectMetadata{}
		target.SetGroupVersionKind(configMapGVK)
		target.SetNamespace(ns)
		target.SetName(name)
		return raw.Patch(b.Context(), target, client.RawPatch(types.MergePatchType, body))
	})
	elapsed := time.Since(start)
	if linked := countLinked(b, ns); linked != n {
		b.Fatalf("raw loop linked %d ConfigMaps", linked)
	}
	// The relinker's run must not pay for this one's objects: take them
	// out of etcd and of the API server's watch cache first. The API
	// server may give up on a long collection delete (a timeout, or a
	// reset stream) while it still deletes: ask again until none is left.
	restored := client.MatchingLabels{capi.ClusterNameLabel: "c1"}
	kubeenv.Eventually(b, 15*time.Minute, func() error {
		list := &metav1.PartialObjectMetadataList{}
		list.SetGroupVersionKind(configMapGVK.GroupVersion().WithKind("ConfigMapList"))
		if err := env.Client.List(b.Context(), list, client.InNamespace(ns), restored, client.Limit(1)); err != nil {
			return err
		}
		if len(list.Items) == 0 {
			return nil
		}
		if err := env.Client.DeleteAllOf(b.Context(), &corev1.ConfigMap{}, client.InNamespace(ns), restored); err != nil {
			return fmt.Errorf("deleting the raw loop's ConfigMaps: %w", err)
		}
		return fmt.Errorf("the raw loop's ConfigMaps are still being deleted")
	})
	return elapsed
}

func benchRelinker(b *testing.B, n int) (elapsed time.Duration, patches, ownerReads int) {
	ns := env.Namespace(b)
	h := startAs(b, unthrottled(), ns, relink.Options{MaxConcurrentReconciles: benchWorkers})
	restoreConfigMaps(b, ns, n)
	// Every ConfigMap has been seen and waits for the Cluster.
	h.waitMetric(b, 15*time.Minute, relink.WaitingMetric, float64(n))
	start := time.Now()
	// The Cluster comes last, restored by the same restore.
	if err := env.Client.Create(b.Context(), restored(b, kubeenv.NewCluster(env.CAPIVersion, ns, "c1"))); err != nil {
		b.Fatal(err)
	}
	for h.metric(b, relink.LinkedMetric, configMapGK) < float64(n) {
		time.Sleep(20 * time.Millisecond)
	}
	elapsed = time.Since(start)
	if linked := countLinked(b, ns); linked != n {
		b.Fatalf("relinker linked %d ConfigMaps", linked)
	}
	return elapsed, h.objectWrites(), h.rm.Counter.Of("clusters", ns).Count("get")
}

func countLinked(b *testing.B, ns string) int {
	b.Helper()
	list := &unstructured.UnstructuredList{}
	list.SetGroupVersionKind(configMapGVK.GroupVersion().WithKind("ConfigMapList"))
	if err := env.Client.List(b.Context(), list, client.InNamespace(ns)); err != nil {
		b.Fatal(err)
	}
	n := 0
	for _, u := range list.Items {
		if _, ok := u.GetAnnotations()[relink.Annotation]; !ok && len(u.GetOwnerReferences()) == 1 {
			n++
		}
	}
	return n
}
