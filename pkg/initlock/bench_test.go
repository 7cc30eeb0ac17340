package initlock_test

import (
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/initlock/initlock/internal/capi"
	"github.com/initlock/initlock/internal/kubeenv"
)

// BenchmarkFreeLock compares an uncontended Lock on a fresh cluster with a
// raw ConfigMap Create, in the same run, alternating the two. It reports
// both latencies, the ratio, and the requests Lock makes per call.
func BenchmarkFreeLock(b *testing.B) {
	f := newFixture(b)
	var lockTime, rawTime time.Duration
	f.counter.Reset()
	for i := range b.N {
		b.StopTimer()
		name := "b" + itoa(i)
		c := f.create(kubeenv.NewCluster(capi.V1Beta2, f.ns, name))
		m := f.create(kubeenv.NewMachine(capi.V1Beta2, f.ns, name, name+"-m"))
		raw := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: f.ns, Name: name + "-raw"},
			Data: map[string]string{"lock-information": `{"machineName":"x"}`}}
		writes, reads := f.counter.Writes(), f.counter.Reads()
		b.StartTimer()

		// Each goes first every other time, so that neither always runs
		// while the API server is still busy with the other's writes.
		rawCreate := func() {
			start := time.Now()
			if err := f.client.Create(b.Context(), raw); err != nil {
				b.Fatal(err)
			}
			rawTime += time.Since(start)
		}
		if i%2 == 0 {
			rawCreate()
		}
		start := time.Now()
		res, err := f.locker.Lock(b.Context(), c, m)
		lockTime += time.Since(start)
		if err != nil || !res.Acquired {
			b.Fatalf("Lock = %+v, %v", res, err)
		}
		if i%2 == 1 {
			rawCreate()
		}

		b.StopTimer()
		// Lock: CREATE lock ∥ PATCH the Cluster's grant register; and the
		// raw CREATE.
		if w, r := f.counter.Writes()-writes, f.counter.Reads()-reads; w != 3 || r != 0 {
			b.Fatalf("free Lock made %d writes and %d reads (with the raw create), want 3 and 0", w, r)
		}
		b.StartTimer()
	}
	report(b, lockTime, rawTime, "create")
}

// BenchmarkReLock compares a healthy re-Lock by the holder with a raw Get
// of the lock, in the same run.
func BenchmarkReLock(b *testing.B) {
	f := newFixture(b)
	m := f.machine("m1")
	f.mustLock(m)
	key := client.ObjectKey{Namespace: f.ns, Name: "c1-lock"}
	var lockTime, rawTime time.Duration
	f.counter.Reset()
	for range b.N {
		start := time.Now()
		if err := f.client.Get(b.Context(), key, &corev1.ConfigMap{}); err != nil {
			b.Fatal(err)
		}
		rawTime += time.Since(start)
		start = time.Now()
		res, err := f.locker.Lock(b.Context(), f.cluster, m)
		lockTime += time.Since(start)
		if err != nil || !res.Acquired {
			b.Fatalf("Lock = %+v, %v", res, err)
		}
	}
	if w := f.counter.Writes(); w != 0 {
		b.Fatalf("healthy re-Locks made %d writes, want 0", w)
	}
	report(b, lockTime, rawTime, "get")
}

func report(b *testing.B, lockTime, rawTime time.Duration, raw string) {
	n := float64(b.N)
	b.ReportMetric(float64(lockTime.Nanoseconds())/n, "lock-ns/op")
	b.ReportMetric(float64(rawTime.Nanoseconds())/n, "raw-"+raw+"-ns/op")
	b.ReportMetric(float64(lockTime)/float64(rawTime), "ratio")
}
