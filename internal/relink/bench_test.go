package relink_test

import (
	"encoding/json"
	"fmt"
	"sync"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/initlock/initlock/internal/kubeenv"
	"github.com/initlock/initlock/internal/relink"
)

const (
	benchObjects = 10000
	benchWorkers = 4
)

// restoreConfigMaps creates n ConfigMaps of Cluster c1 as a restore leaves
// them, and returns their resourceVersions by name.
func restoreConfigMaps(b *testing.B, ns string, n int) map[string]string {
	b.Helper()
	var mu sync.Mutex
	rvs := make(map[string]string, n)
	parallel(b, n, 16, func(i int) error {
		cm := restoredConfigMap(b, ns, fmt.Sprintf("cm-%05d", i), "c1", clusterOwner("c1"))
		if err := env.Client.Create(b.Context(), cm); err != nil {
			return err
		}
		mu.Lock()
		rvs[cm.GetName()] = cm.GetResourceVersion()
		mu.Unlock()
		return nil
	})
	return rvs
}

// parallel runs f(0..n-1) on workers goroutines.
func parallel(b *testing.B, n, workers int, f func(int) error) {
	b.Helper()
	next := make(chan int)
	errs := make(chan error, workers)
	var wg sync.WaitGroup
	for range workers {
		wg.Go(func() {
			for i := range next {
				if err := f(i); err != nil {
					errs <- err
					return
				}
			}
		})
	}
	for i := range n {
		select {
		case next <- i:
		case err := <-errs:
			close(next)
			wg.Wait()
			b.Fatal(err)
		}
	}
	close(next)
	wg.Wait()
	select {
	case err := <-errs:
		b.Fatal(err)
	default:
	}
}

// BenchmarkRelink relinks 10,000 restored ConfigMaps to their Cluster, and,
// in the same run, links as many with a raw loop of merge patches that
// knows every UID and resourceVersion beforehand and reads nothing. Both
// use 4 workers and the same client limits. The relinker is running while
// the ConfigMaps are restored, as in a Velero restore, and its time runs
// from the moment the Cluster is restored until the last ConfigMap is
// linked. Reported: seconds and ns per object for each, their ratio, and
// the relinker's patches per object.
func BenchmarkRelink(b *testing.B) {
	// One iteration takes minutes, far over the default -benchtime, so
	// the benchmark runs it once; ns/op includes creating the objects.
	for b.Loop() {
		raw := benchRawPatchLoop(b)
		rel, patches := benchRelinker(b)
		b.ReportMetric(raw.Seconds(), "raw-s")
		b.ReportMetric(rel.Seconds(), "relink-s")
		b.ReportMetric(float64(raw.Nanoseconds())/benchObjects, "raw-ns/object")
		b.ReportMetric(float64(rel.Nanoseconds())/benchObjects, "relink-ns/object")
		b.ReportMetric(rel.Seconds()/raw.Seconds(), "ratio")
		b.ReportMetric(float64(patches)/benchObjects, "patches/object")
	}
}

func benchRawPatchLoop(b *testing.B) time.Duration {
	ns := env.Namespace(b)
	cluster := kubeenv.NewCluster(env.CAPIVersion, ns, "c1")
	if err := env.Client.Create(b.Context(), cluster); err != nil {
		b.Fatal(err)
	}
	rvs := restoreConfigMaps(b, ns, benchObjects)
	refs := []metav1.OwnerReference{refTo(cluster, false)}
	start := time.Now()
	parallel(b, benchObjects, benchWorkers, func(i int) error {
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
		return env.Client.Patch(b.Context(), target, client.RawPatch(types.MergePatchType, body))
	})
	elapsed := time.Since(start)
	if n := countLinked(b, ns); n != benchObjects {
		b.Fatalf("raw loop linked %d ConfigMaps", n)
	}
	return elapsed
}

func benchRelinker(b *testing.B) (time.Duration, int) {
	ns := env.Namespace(b)
	h := start(b, ns, relink.Options{MaxConcurrentReconciles: benchWorkers})
	restoreConfigMaps(b, ns, benchObjects)
	// Every ConfigMap has been seen and waits for the Cluster.
	kubeenv.Eventually(b, 5*time.Minute, func() error {
		if n := h.metric(b, relink.WaitingMetric, configMapGK); n != benchObjects {
			return fmt.Errorf("%v ConfigMaps waiting", n)
		}
		return nil
	})
	start := time.Now()
	if err := env.Client.Create(b.Context(), kubeenv.NewCluster(env.CAPIVersion, ns, "c1")); err != nil {
		b.Fatal(err)
	}
	for h.metric(b, relink.LinkedMetric, configMapGK) < benchObjects {
		time.Sleep(20 * time.Millisecond)
	}
	elapsed := time.Since(start)
	if n := countLinked(b, ns); n != benchObjects {
		b.Fatalf("relinker linked %d ConfigMaps", n)
	}
	return elapsed, len(h.log.objectWrites())
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
