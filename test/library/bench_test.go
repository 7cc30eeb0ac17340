package library_test

import (
	"encoding/json"
	"strconv"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/initlock/initlock/internal/benchreport/loadavg"
	"github.com/initlock/initlock/internal/capi"
	"github.com/initlock/initlock/internal/kubeenv"
	"github.com/initlock/initlock/pkg/initlock"
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
// the two raw writes its free path makes, each measured alone in the same
// run: a ConfigMap Create, and the same compare-and-swap JSON patch of a
// fresh Cluster's annotations (tests of the UID, of spec.paused and of the
// absent annotations, then the add). The three take turns going first, so
// that none always runs while the API server still digests another's
// write. It reports the three latencies, Lock against the raw Create
// (ratio) and against the slower raw write, the floor of a round of
// parallel writes (floor-ratio), and asserts the requests of every call:
// Lock 1 read and 2 writes, each raw write 1 write.
func BenchmarkFreeLock(b *testing.B) {
	defer loadavg.Record(b)()
	f := newFixture(b)
	lock := &timed{name: "free Lock", reads: freeLockReads, writes: freeLockWrites}
	create := &timed{name: "raw ConfigMap Create", writes: 1}
	patch := &timed{name: "raw compare-and-swap patch of a Cluster", writes: 1}
	// One round first, untimed, so that no figure carries the client's
	// first discovery of the Cluster API kinds.
	freeLockRound(b, f, "warm", 0, &timed{name: "warm-up Lock", reads: freeLockReads, writes: freeLockWrites},
		&timed{name: "warm-up Create", writes: 1}, &timed{name: "warm-up patch", writes: 1})
	b.ResetTimer()
	for i := range b.N {
		freeLockRound(b, f, "b"+strconv.Itoa(i), i, lock, create, patch)
	}
	lockNs, createNs, patchNs := lock.perOp(b.N), create.perOp(b.N), patch.perOp(b.N)
	b.ReportMetric(lockNs, "lock-ns/op")
	b.ReportMetric(createNs, "raw-create-ns/op")
	b.ReportMetric(patchNs, "raw-patch-ns/op")
	b.ReportMetric(lockNs/createNs, "ratio")
	b.ReportMetric(lockNs/max(createNs, patchNs), "floor-ratio")
	b.ReportMetric(freeLockReads, "reads/lock")
	b.ReportMetric(freeLockWrites, "writes/lock")
}

// freeLockRound creates a fresh Cluster, its Machine and a second fresh
// Cluster, then times the free Lock, the raw Create and the raw patch one
// after the other, the ith round starting with the (i mod 3)th.
func freeLockRound(b *testing.B, f *fixture, name string, i int, lock, create, patch *timed) {
	b.StopTimer()
	cl := f.create(kubeenv.NewCluster(capi.V1Beta2, f.ns, name))
	m := f.create(kubeenv.NewMachine(capi.V1Beta2, f.ns, name, name+"-m"))
	other := f.create(kubeenv.NewCluster(capi.V1Beta2, f.ns, name+"-raw"))
	raw := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: f.ns, Name: name + "-raw-lock",
		Labels: map[string]string{initlock.ClusterNameLabel: name + "-raw"}},
		Data: map[string]string{initlock.DataKey: `{"machineName":"` + name + `-m"}`}}
	casPatch := registerLikePatch(b, other)
	b.StartTimer()
	steps := []func(){
		func() {
			lock.run(b, f, func() error {
				res, err := f.locker.Lock(b.Context(), cl, m)
				if err == nil && (!res.Acquired || res.Verdict != initlock.VerdictFree) {
					b.Fatalf("Lock = %+v, want the free path to acquire it", res)
				}
				return err
			})
		},
		func() { create.run(b, f, func() error { return f.client.Create(b.Context(), raw) }) },
		func() {
			patch.run(b, f, func() error {
				return f.client.Patch(b.Context(), clusterTarget(other), client.RawPatch(types.JSONPatchType, casPatch))
			})
		},
	}
	for k := range steps {
		steps[(i+k)%len(steps)]()
	}
}

// BenchmarkReLock compares a healthy re-Lock by the holder with a raw Get
// of the lock, taking turns going first, and asserts the requests of
// every call: re-Lock 3 reads (lock, Cluster and Machine, in parallel) and
// no write, the raw Get 1 read.
func BenchmarkReLock(b *testing.B) {
	defer loadavg.Record(b)()
	f := newFixture(b)
	m := f.machine("m1")
	if res := f.mustLock(m); !res.Acquired {
		b.Fatalf("first Lock = %+v", res)
	}
	key := client.ObjectKey{Namespace: f.ns, Name: f.cluster.GetName() + initlock.LockSuffix}
	lock := &timed{name: "healthy re-Lock", reads: reLockReads, writes: reLockWrites}
	get := &timed{name: "raw ConfigMap Get", reads: 1}
	// The first Lock above discovered the kinds; one untimed raw Get warms
	// the ConfigMap path likewise.
	(&timed{name: "warm-up Get", reads: 1}).run(b, f, func() error { return f.client.Get(b.Context(), key, &corev1.ConfigMap{}) })
	b.ResetTimer()
	for i := range b.N {
		steps := []func(){
			func() { get.run(b, f, func() error { return f.client.Get(b.Context(), key, &corev1.ConfigMap{}) }) },
			func() {
				lock.run(b, f, func() error {
					res, err := f.locker.Lock(b.Context(), f.cluster, m)
					if err == nil && (!res.Acquired || res.Action != initlock.ActionNone) {
						b.Fatalf("re-Lock = %+v, want it held and nothing changed", res)
					}
					return err
				})
			},
		}
		for k := range steps {
			steps[(i+k)%len(steps)]()
		}
	}
	lockNs, getNs := lock.perOp(b.N), get.perOp(b.N)
	b.ReportMetric(lockNs, "lock-ns/op")
	b.ReportMetric(getNs, "raw-get-ns/op")
	b.ReportMetric(lockNs/getNs, "ratio")
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
		{"op": "add", "path": "/metadata/annotations", "value": map[string]string{initlock.GrantAnnotation: value}},
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
