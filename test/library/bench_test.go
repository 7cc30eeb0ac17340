package library_test

import (
	"encoding/json"
	"errors"
	"strconv"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/initlock/initlock/internal/benchreport/loadavg"
	"github.com/initlock/initlock/internal/kubeenv"
	"github.com/initlock/initlock/internal/kubeenv/wire"
	"github.com/initlock/initlock/pkg/initlock/capi"
)

// Requests per call that the benchmarks assert, as the package
// documentation of pkg/initlock gives them.
const (
	// Free Lock: CREATE lock ∥ PATCH register ∥ GET the caller's Machine.
	freeLockReads, freeLockWrites = 1, 2
	// Healthy re-Lock by the holder: GET lock ∥ GET Cluster ∥ GET Machine.
	reLockReads, reLockWrites = 3, 0
)

// timed measures one step and checks the requests it made.
type timed struct {
	name          string
	reads, writes int
	total         time.Duration
}

// run times step alone and fails b unless it made exactly t.reads reads
// and t.writes writes.
func (t *timed) run(b *testing.B, f *fixture, step func() error) {
	b.Helper()
	r0, w0 := f.counter.Reads(), f.counter.Writes()
	start := time.Now()
	err := step()
	t.total += time.Since(start)
	if err != nil {
		b.Fatalf("%s: %v", t.name, err)
	}
	if r, w := f.counter.Reads()-r0, f.counter.Writes()-w0; r != t.reads || w != t.writes {
		b.Fatalf("%s made %d reads and %d writes, want %d and %d", t.name, r, w, t.reads, t.writes)
	}
}

// perOp is t's mean time per call, in nanoseconds.
func (t *timed) perOp(n int) float64 { return float64(t.total.Nanoseconds()) / float64(n) }

// BenchmarkFreeLock compares an uncontended Lock on a fresh Cluster with
// the requests of its free path made raw, each measured in the same run: a
// ConfigMap Create, the same compare-and-swap JSON patch of a fresh
// Cluster's annotations (tests of the UID, of spec.paused and of the
// absent annotations, then the add), and the free path's three requests
// made raw in its order (the patch ∥ a metadata Get of a Machine, then the
// Create), on other fresh objects. The steps take turns going first, so
// that none always runs while the API server still digests another's
// write. It reports the latencies, Lock against the raw Create (ratio),
// against its two writes one after the other, each timed alone
// (floor-ratio), and against the raw round (round-ratio), and asserts the
// requests of every call: Lock and the raw round 1 read and 2 writes, each
// raw write 1 write. The upstream lock's free Lock is compared in
// hack/contention (BenchmarkFreeLockVsUpstream), whose module has it.
func BenchmarkFreeLock(b *testing.B) {
	defer loadavg.Record(b)()
	f := newFixture(b)
	t := newFreeLockTimers("")
	// One round first, untimed, so that no figure carries the client's
	// first discovery of the Cluster API kinds.
	freeLockRound(b, f, "warm", 0, newFreeLockTimers("warm-up: "))
	b.ResetTimer()
	for i := range b.N {
		freeLockRound(b, f, "b"+strconv.Itoa(i), i, t)
	}
	lockNs, createNs, patchNs := t.lock.perOp(b.N), t.create.perOp(b.N), t.patch.perOp(b.N)
	roundNs := t.round.perOp(b.N)
	b.ReportMetric(lockNs, "lock-ns/op")
	b.ReportMetric(createNs, "raw-create-ns/op")
	b.ReportMetric(patchNs, "raw-patch-ns/op")
	b.ReportMetric(roundNs, "raw-round-ns/op")
	b.ReportMetric(lockNs/createNs, "ratio")
	b.ReportMetric(lockNs/(createNs+patchNs), "floor-ratio")
	b.ReportMetric(lockNs/roundNs, "round-ratio")
	b.ReportMetric(freeLockReads, "reads/lock")
	b.ReportMetric(freeLockWrites, "writes/lock")
}

// freeLockTimers are the steps BenchmarkFreeLock times.
type freeLockTimers struct{ lock, create, patch, round *timed }

// newFreeLockTimers returns the timers of BenchmarkFreeLock's steps, their
// names after prefix, each asserting its requests.
func newFreeLockTimers(prefix string) freeLockTimers {
	return freeLockTimers{
		lock:   &timed{name: prefix + "free Lock", reads: freeLockReads, writes: freeLockWrites},
		create: &timed{name: prefix + "raw ConfigMap Create", writes: 1},
		patch:  &timed{name: prefix + "raw compare-and-swap patch of a Cluster", writes: 1},
		round:  &timed{name: prefix + "raw round", reads: freeLockReads, writes: freeLockWrites},
	}
}

// freeLockRound creates a fresh Cluster with its Machine, and two other
// fresh Clusters, then times the free Lock, the raw Create, the raw patch
// and the raw round one after the other, the ith round starting with the
// (i mod 4)th.
func freeLockRound(b *testing.B, f *fixture, name string, i int, t freeLockTimers) {
	b.StopTimer()
	cl := f.create(kubeenv.NewCluster(capi.V1Beta2, f.ns, name))
	m := f.create(kubeenv.NewMachine(capi.V1Beta2, f.ns, name, name+"-m"))
	other := f.create(kubeenv.NewCluster(capi.V1Beta2, f.ns, name+"-raw"))
	third := f.create(kubeenv.NewCluster(capi.V1Beta2, f.ns, name+"-round"))
	casPatch, roundPatch := registerLikePatch(b, other), registerLikePatch(b, third)
	machine := &metav1.PartialObjectMetadata{}
	machine.SetGroupVersionKind(m.GroupVersionKind())
	b.StartTimer()
	steps := []func(){
		func() {
			t.lock.run(b, f, func() error {
				res, err := f.locker.Lock(b.Context(), cl, m)
				if err == nil && (!res.Acquired || res.Verdict != "free") {
					b.Fatalf("Lock = %+v, want the free path to acquire it", res)
				}
				return err
			})
		},
		func() {
			t.create.run(b, f, func() error { return f.client.Create(b.Context(), rawLock(f.ns, name+"-raw")) })
		},
		func() {
			t.patch.run(b, f, func() error {
				return f.client.Patch(b.Context(), clusterTarget(other), client.RawPatch(types.JSONPatchType, casPatch))
			})
		},
		func() {
			t.round.run(b, f, func() error {
				err := parallel(
					func() error {
						return f.client.Patch(b.Context(), clusterTarget(third), client.RawPatch(types.JSONPatchType, roundPatch))
					},
					func() error { return f.client.Get(b.Context(), client.ObjectKeyFromObject(m), machine) })
				if err != nil {
					return err
				}
				return f.client.Create(b.Context(), rawLock(f.ns, name+"-round"))
			})
		},
	}
	for k := range steps {
		steps[(i+k)%len(steps)]()
	}
}

// parallel runs the requests at once and joins their errors.
func parallel(requests ...func() error) error {
	var wg sync.WaitGroup
	errs := make([]error, len(requests))
	for i, r := range requests {
		wg.Go(func() { errs[i] = r() })
	}
	wg.Wait()
	return errors.Join(errs...)
}

// rawLock is a lock of the upstream format for the Cluster named cluster,
// as a raw client would create it.
func rawLock(ns, cluster string) *corev1.ConfigMap {
	return &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: cluster + wire.LockSuffix,
		Labels: map[string]string{wire.ClusterNameLabel: cluster}},
		Data: map[string]string{wire.DataKey: `{"machineName":"` + cluster + `-m"}`}}
}

// BenchmarkReLock compares a healthy re-Lock by the holder with a raw Get
// of the lock, and with the re-Lock's three reads made raw in parallel (the
// lock, the Cluster, and the Machine's metadata), taking turns going
// first. It reports Lock against the raw Get (ratio) and against the raw
// parallel reads (round-ratio), and asserts the requests of every call:
// re-Lock and the raw reads 3 reads and no write, the raw Get 1 read.
func BenchmarkReLock(b *testing.B) {
	defer loadavg.Record(b)()
	f := newFixture(b)
	m := f.machine("m1")
	if res := f.mustLock(m); !res.Acquired {
		b.Fatalf("first Lock = %+v", res)
	}
	key := client.ObjectKey{Namespace: f.ns, Name: f.cluster.GetName() + wire.LockSuffix}
	lock := &timed{name: "healthy re-Lock", reads: reLockReads, writes: reLockWrites}
	get := &timed{name: "raw ConfigMap Get", reads: 1}
	round := &timed{name: "raw parallel reads", reads: reLockReads}
	threeGets := func() error {
		cl := &unstructured.Unstructured{}
		cl.SetGroupVersionKind(f.cluster.GroupVersionKind())
		machine := &metav1.PartialObjectMetadata{}
		machine.SetGroupVersionKind(m.GroupVersionKind())
		return parallel(
			func() error { return f.client.Get(b.Context(), key, &corev1.ConfigMap{}) },
			func() error { return f.client.Get(b.Context(), client.ObjectKeyFromObject(f.cluster), cl) },
			func() error { return f.client.Get(b.Context(), client.ObjectKeyFromObject(m), machine) })
	}
	// The first Lock above discovered the kinds; one untimed round of raw
	// reads warms their paths likewise.
	(&timed{name: "warm-up reads", reads: reLockReads}).run(b, f, threeGets)
	b.ResetTimer()
	for i := range b.N {
		steps := []func(){
			func() { get.run(b, f, func() error { return f.client.Get(b.Context(), key, &corev1.ConfigMap{}) }) },
			func() {
				lock.run(b, f, func() error {
					res, err := f.locker.Lock(b.Context(), f.cluster, m)
					if err == nil && (!res.Acquired || res.Action != "none") {
						b.Fatalf("re-Lock = %+v, want it held and nothing changed", res)
					}
					return err
				})
			},
			func() { round.run(b, f, threeGets) },
		}
		for k := range steps {
			steps[(i+k)%len(steps)]()
		}
	}
	lockNs, getNs, roundNs := lock.perOp(b.N), get.perOp(b.N), round.perOp(b.N)
	b.ReportMetric(lockNs, "lock-ns/op")
	b.ReportMetric(getNs, "raw-get-ns/op")
	b.ReportMetric(roundNs, "raw-round-ns/op")
	b.ReportMetric(lockNs/getNs, "ratio")
	b.ReportMetric(lockNs/roundNs, "round-ratio")
	b.ReportMetric(reLockReads, "reads/lock")
	b.ReportMetric(reLockWrites, "writes/lock")
}

// registerLikePatch is a compare-and-swap JSON patch of a fresh Cluster
// (one without annotations and without spec.paused) shaped like the one a
// free Lock sends: it tests the UID, spec.paused and the absence of
// annotations, then adds the annotation with a value of a grant's size.
func registerLikePatch(b *testing.B, cl *unstructured.Unstructured) []byte {
	b.Helper()
	value := `{"machineName":"` + cl.GetName() + `-m","machineUID":"00000000-0000-0000-0000-000000000000",` +
		`"clusterUID":"` + string(cl.GetUID()) + `","token":"0123456789abcdef0123456789abcdef","acquiredAt":"2026-01-01T00:00:00Z"}`
	p, err := json.Marshal([]map[string]any{
		{"op": "test", "path": "/metadata/uid", "value": string(cl.GetUID())},
		{"op": "test", "path": "/spec/paused", "value": nil},
		{"op": "test", "path": "/metadata/annotations", "value": nil},
		{"op": "add", "path": "/metadata/annotations", "value": map[string]string{wire.GrantAnnotation: value}},
	})
	if err != nil {
		b.Fatal(err)
	}
	return p
}

// clusterTarget is an empty object naming cl, to patch it.
func clusterTarget(cl *unstructured.Unstructured) *unstructured.Unstructured {
	u := &unstructured.Unstructured{}
	u.SetGroupVersionKind(cl.GroupVersionKind())
	u.SetNamespace(cl.GetNamespace())
	u.SetName(cl.GetName())
	return u
}
