package library_test

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/initlock/initlock/internal/benchreport/loadavg"
	"github.com/initlock/initlock/internal/kubeenv"
	"github.com/initlock/initlock/internal/kubeenv/wire"
)

// guardTimers are the requests BenchmarkLockGuard times, in one state of
// the lock guard.
type guardTimers struct {
	plainCreate, plainUpdate, plainDelete *timed
	lockCreate, lockMark, lockDelete      *timed
	// bareCreate and bareDelete release a lock without the release mark,
	// as a release could without the guard.
	bareCreate, bareDelete *timed
	rounds                 int
}

// guardBlocks is how many blocks of rounds BenchmarkLockGuard runs in each
// state of the guard.
const guardBlocks = 4

// setGuard installs or removes the lock guard and waits until the API
// server enforces it, or no longer does.
func setGuard(b *testing.B, f *fixture, on bool) {
	b.Helper()
	set := env.UninstallLockGuard
	if on {
		set = env.InstallLockGuard
	}
	if err := set(f.ctx()); err != nil {
		b.Fatal(err)
	}
}

func newGuardTimers(state string) *guardTimers {
	w := func(what string) *timed { return &timed{name: what + " (" + state + ")", writes: 1} }
	return &guardTimers{
		plainCreate: w("create of a ConfigMap"), plainUpdate: w("update of a ConfigMap"), plainDelete: w("delete of a ConfigMap"),
		lockCreate: w("create of a lock"), lockMark: w("release mark of a lock"), lockDelete: w("delete of a marked lock"),
		bareCreate: w("create of a lock"), bareDelete: w("delete of an unmarked lock"),
	}
}

func (g *guardTimers) ns(t *timed) float64 { return t.perOp(g.rounds) }

// BenchmarkLockGuard measures what the lock guard (config/protection: a
// ValidatingAdmissionPolicy on the DELETE and UPDATE of ConfigMaps) adds to
// the requests it sees, against the same requests without it, in one run:
// the create, update and delete of an ordinary ConfigMap (its update and
// delete are matched, and let through by the policy's match condition),
// and the release of a lock
// as initlock makes it (create, the release mark, the delete with UID and
// resourceVersion preconditions, which the policy evaluates and admits).
// b.N rounds run without the guard and b.N with it, in blocks (without,
// with, with, without, twice over: guardBlocks blocks in each state), so
// that a drift of the machine's speed weighs on both alike; installing and
// removing the guard is not timed. The creates, which the guard does not
// match, are compared too (create-ratio): the noise floor of the others. Without the guard, each
// round also releases a lock without the mark, as a release could before
// the guard: mark-ratio is what the guard and its mark add to a release.
// Every request is asserted to be one write, and, with the guard, the
// delete of an unmarked lock to be refused. Then guardPluginTimes reads,
// from the API server's own histogram, the time the policy plugin spends
// on an unrelated update and delete with the guard and without; the time
// it adds, over the request's latency without the guard, is the guard's
// cost to unrelated traffic (plugin-*-added-ratio), which the run's noise
// does not enter: the plugin runs inline, in the request.
func BenchmarkLockGuard(b *testing.B) {
	defer loadavg.Record(b)()
	f := newFixture(b)
	b.Cleanup(func() { env.RemoveLockGuard(b) })
	off, on := newGuardTimers("without the guard"), newGuardTimers("with the guard")
	// A round first, untimed, in each state: the client's first requests
	// and the API server's first evaluation of the policy.
	guardRound(b, f, "warm-off", newGuardTimers("warm-up"), false)
	setGuard(b, f, true)
	guardRound(b, f, "warm-on", newGuardTimers("warm-up"), true)
	setGuard(b, f, false)
	b.ResetTimer()
	// b.N rounds in each state, in 2·blocks blocks: without, with, with,
	// without, and again.
	blocks := min(b.N, guardBlocks)
	guarded := false
	for blk := range 2 * blocks {
		want := blk%4 == 1 || blk%4 == 2
		if want != guarded {
			b.StopTimer()
			setGuard(b, f, want)
			guarded = want
			b.StartTimer()
		}
		g, state := off, "off"
		if guarded {
			g, state = on, "on"
		}
		for i := blk / 2 * b.N / blocks; i < (blk/2+1)*b.N/blocks; i++ {
			guardRound(b, f, state+"-"+strconv.Itoa(i), g, guarded)
		}
	}
	b.StopTimer()
	if guarded {
		setGuard(b, f, false)
	}
	// What the guard adds to an unrelated request, read from the API
	// server's own histogram of the policy plugin, against the request's
	// latency without the guard: the run's noise, which the ratios above
	// carry, does not enter it.
	plugin := guardPluginTimes(b, f)
	for op, latency := range map[string]*timed{"UPDATE": off.plainUpdate, "DELETE": off.plainDelete} {
		name := strings.ToLower(op)
		b.ReportMetric(plugin[false][op], "plugin-"+name+"-off-us")
		b.ReportMetric(plugin[true][op], "plugin-"+name+"-on-us")
		added := (plugin[true][op] - plugin[false][op]) * 1e3 // ns
		b.ReportMetric(1+added/off.ns(latency), "plugin-"+name+"-added-ratio")
	}

	plain := func(g *guardTimers) float64 { return g.ns(g.plainCreate) + g.ns(g.plainUpdate) + g.ns(g.plainDelete) }
	// The creates are not matched by the guard: their ratio shows what
	// the machine's noise alone makes of the others.
	b.ReportMetric(on.ns(on.plainCreate)/off.ns(off.plainCreate), "create-ratio")
	lock := func(g *guardTimers) float64 { return g.ns(g.lockCreate) + g.ns(g.lockMark) + g.ns(g.lockDelete) }
	b.ReportMetric(plain(off), "plain-off-ns/op")
	b.ReportMetric(plain(on), "plain-on-ns/op")
	b.ReportMetric(plain(on)/plain(off), "plain-ratio")
	b.ReportMetric(on.ns(on.plainDelete)/off.ns(off.plainDelete), "plain-delete-ratio")
	b.ReportMetric(on.ns(on.plainUpdate)/off.ns(off.plainUpdate), "plain-update-ratio")
	b.ReportMetric(lock(off), "lock-off-ns/op")
	b.ReportMetric(lock(on), "lock-on-ns/op")
	b.ReportMetric(lock(on)/lock(off), "lock-ratio")
	b.ReportMetric(on.ns(on.lockDelete)/off.ns(off.lockDelete), "lock-delete-ratio")
	bare := off.ns(off.bareCreate) + off.ns(off.bareDelete)
	b.ReportMetric(bare, "bare-off-ns/op")
	b.ReportMetric(lock(on)/bare, "mark-ratio")
}

// guardRound times, on fresh objects, the create and delete of an ordinary
// ConfigMap, its update and delete, and the release of a lock (create, mark,
// delete); without the guard, also the release of a lock without the mark;
// with it, checks that the delete of an unmarked lock, and an update taking
// its label away, are refused.
func guardRound(b *testing.B, f *fixture, name string, g *guardTimers, guarded bool) {
	b.Helper()
	ctx := f.ctx()
	g.rounds++
	plain := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: f.ns, Name: "plain-" + name}, Data: map[string]string{"k": "v"}}
	g.plainCreate.run(b, f, func() error { return f.client.Create(ctx, plain) })
	changed := plain.DeepCopy()
	changed.Data["k"] = "w"
	g.plainUpdate.run(b, f, func() error {
		return f.client.Patch(ctx, changed, client.MergeFromWithOptions(plain, client.MergeFromWithOptimisticLock{}))
	})
	g.plainDelete.run(b, f, func() error { return f.client.Delete(ctx, changed) })

	lock := kubeenv.NewLock(f.ns, "g-"+name, "m", nil)
	g.lockCreate.run(b, f, func() error { return f.client.Create(ctx, lock) })
	if guarded {
		b.StopTimer()
		if err := f.admin.Delete(ctx, lock.DeepCopy(), client.DryRunAll); !apierrors.IsForbidden(err) {
			b.Fatalf("with the lock guard, the delete of unmarked lock %s answered %v; want it refused", lock.Name, err)
		}
		unlabelled := lock.DeepCopy()
		unlabelled.Labels = nil
		if err := f.admin.Update(ctx, unlabelled, client.DryRunAll); !apierrors.IsForbidden(err) {
			b.Fatalf("with the lock guard, the update taking unmarked lock %s's label away answered %v; want it refused", lock.Name, err)
		}
		b.StartTimer()
	}
	marked := lock.DeepCopy()
	marked.Annotations = map[string]string{wire.ReleaseAnnotation: string(lock.UID)}
	g.lockMark.run(b, f, func() error {
		return f.client.Patch(ctx, marked, client.MergeFromWithOptions(lock, client.MergeFromWithOptimisticLock{}))
	})
	g.lockDelete.run(b, f, func() error {
		return f.client.Delete(ctx, marked, client.Preconditions{UID: &marked.UID, ResourceVersion: &marked.ResourceVersion})
	})
	if guarded {
		return
	}
	bare := kubeenv.NewLock(f.ns, "b-"+name, "m", nil)
	g.bareCreate.run(b, f, func() error { return f.client.Create(ctx, bare) })
	g.bareDelete.run(b, f, func() error {
		return f.client.Delete(ctx, bare, client.Preconditions{UID: &bare.UID, ResourceVersion: &bare.ResourceVersion})
	})
}

// pluginBlockRounds is how many updates and deletes of ordinary ConfigMaps
// each block of guardPluginTimes makes.
const pluginBlockRounds = 25

// guardPluginTimes measures, from the API server's own histogram, the time
// the ValidatingAdmissionPolicy plugin spends on the update and the delete
// of a ConfigMap that is not a lock, with the guard (true) and without
// (false), in microseconds per request: blocks of pluginBlockRounds
// creates, updates and deletes of ordinary ConfigMaps, without, with, with
// and without the guard, read between blocks. Only this test writes
// meanwhile, but for the control plane's own clients (lease renewals,
// which no policy matches).
func guardPluginTimes(b *testing.B, f *fixture) map[bool]map[string]float64 {
	b.Helper()
	ctx := f.ctx()
	sums := map[bool]map[string]kubeenv.AdmissionTime{false: {}, true: {}}
	for blk, on := range []bool{false, true, true, false} {
		setGuard(b, f, on)
		before, err := env.AdmissionTimes(ctx, "ValidatingAdmissionPolicy")
		if err != nil {
			b.Fatal(err)
		}
		for i := range pluginBlockRounds {
			plain := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: f.ns, Name: fmt.Sprintf("plugin-%d-%d", blk, i)}, Data: map[string]string{"k": "v"}}
			changed := plain.DeepCopy()
			changed.Data["k"] = "w"
			if err := errors.Join(f.client.Create(ctx, plain),
				f.client.Patch(ctx, changed, client.MergeFromWithOptions(plain, client.MergeFromWithOptimisticLock{})),
				f.client.Delete(ctx, changed)); err != nil {
				b.Fatal(err)
			}
		}
		after, err := env.AdmissionTimes(ctx, "ValidatingAdmissionPolicy")
		if err != nil {
			b.Fatal(err)
		}
		for _, op := range []string{"UPDATE", "DELETE"} {
			d := after[op].Sub(before[op])
			if d.Requests < pluginBlockRounds {
				b.Fatalf("the API server's histogram counts %v %s requests of the plugin in a block of %d", d.Requests, op, pluginBlockRounds)
			}
			t := sums[on][op]
			sums[on][op] = kubeenv.AdmissionTime{Seconds: t.Seconds + d.Seconds, Requests: t.Requests + d.Requests}
		}
	}
	setGuard(b, f, false)
	us := map[bool]map[string]float64{false: {}, true: {}}
	for on, ops := range sums {
		for op, t := range ops {
			us[on][op] = t.Seconds / t.Requests * 1e6
		}
	}
	return us
}
