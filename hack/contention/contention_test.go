package contention

import (
	"context"
	"encoding/json"
	"fmt"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/cluster-api/bootstrap/kubeadm/pkg/locking"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/initlock/initlock/internal/benchreport/loadavg"
	"github.com/initlock/initlock/internal/kubeenv"
	"github.com/initlock/initlock/internal/kubeenv/wire"
	"github.com/initlock/initlock/pkg/initlock"
	"github.com/initlock/initlock/pkg/initlock/capi"
)

// BenchmarkContention has contention.callers control-plane Machines of one
// fresh Cluster call Lock at the same moment, each retrying as a
// reconciler does (retryDelay) until it acquires the lock or is told that
// another Machine holds it, and does the same, in the same run, with the
// upstream lock of CABPK v1.14.2 on another fresh Cluster. The two take
// turns going first, one round each per iteration. Each has a client of
// its own, as a provider has; a caller that tries again reads its Cluster
// again first, as a reconciler does from its cache (those reads, standing
// in for the cache, are not counted). Each lock's client makes one untimed
// Lock first (warm).
//
// It asserts that exactly one caller acquired each lock, that no refused
// initlock caller was told another name than the winner's, that the lock and
// initlock's grant register name the winner, and that the requests the
// callers made add up exactly to those the API server was sent. Reported,
// pooled over the rounds: the time to the winner's answer (mean), the p50
// and p99 over callers of the time to their final answer, requests,
// attempts and retries per caller, for each, and p99-ratio, initlock's p99
// over upstream's (target ≤ 1.5).
func BenchmarkContention(b *testing.B) {
	defer loadavg.Record(b)()
	n := *callers
	ns, il, up := contenders(b)
	var ils, ups stats
	for i := range b.N {
		b.StopTimer()
		ilRound := il.prepare(b, ns, fmt.Sprintf("i%d", i), n)
		upRound := up.prepare(b, ns, fmt.Sprintf("u%d", i), n)
		b.StartTimer()
		rounds := []func(){
			func() { ilRound.run(b, &ils, lockInitlock) },
			func() { upRound.run(b, &ups, lockUpstream) },
		}
		rounds[i%2]()
		rounds[(i+1)%2]()
	}
	b.StopTimer()
	for _, s := range []struct {
		name string
		s    *stats
	}{{"initlock", &ils}, {"upstream", &ups}} {
		b.ReportMetric(s.s.meanWinner(), s.name+"-winner-ms")
		b.ReportMetric(s.s.percentile(0.50), s.name+"-p50-ms")
		b.ReportMetric(s.s.percentile(0.99), s.name+"-p99-ms")
		b.ReportMetric(s.s.perCaller(s.s.requests), s.name+"-req/caller")
		b.ReportMetric(s.s.perCaller(s.s.writes), s.name+"-writes/caller")
		b.ReportMetric(s.s.perCaller(s.s.attempts), s.name+"-attempts/caller")
		b.ReportMetric(s.s.perCaller(s.s.errors), s.name+"-retries/caller")
	}
	b.ReportMetric(ils.percentile(0.99)/ups.percentile(0.99), "p99-ratio")
	b.ReportMetric(float64(n), "callers")
}

// contender is one lock implementation's client, shared by its callers.
type contender struct {
	name    string
	counter *kubeenv.Counter
	client  client.Client
}

func newContender(b *testing.B, name string) *contender {
	b.Helper()
	counter := &kubeenv.Counter{}
	return &contender{name: name, counter: counter, client: typedClient(b, counter.CountingConfig(env.Config))}
}

// contenders returns a fresh namespace and the warmed-up contenders of
// initlock and of the upstream lock.
func contenders(b *testing.B) (string, *contender, *contender) {
	b.Helper()
	ns := env.Namespace(b)
	il, up := newContender(b, "initlock"), newContender(b, "upstream")
	il.warm(b, ns, lockInitlock)
	up.warm(b, ns, lockUpstream)
	return ns, il, up
}

// warm makes one untimed Lock with c's client, on a Cluster of its own, so
// that no round carries the client's first discovery of the kinds it uses.
func (c *contender) warm(b *testing.B, ns string, lock lockFunc) {
	b.Helper()
	r := c.prepare(b, ns, "warm-"+c.name, 1)
	if a, err := lock(b.Context(), r, 0, r.cluster.DeepCopy()); err != nil || !a.acquired {
		b.Fatalf("%s: warm-up Lock: %+v, %v", c.name, a, err)
	}
}

// round is one Cluster and its Machines, ready to race.
type round struct {
	c        *contender
	cluster  *unstructured.Unstructured
	machines []*unstructured.Unstructured
	clients  []*callerClient
}

// prepare creates a Cluster and n control-plane Machines of it.
func (c *contender) prepare(b *testing.B, ns, name string, n int) *round {
	b.Helper()
	r := &round{c: c, cluster: kubeenv.NewCluster(capi.V1Beta2, ns, name), machines: make([]*unstructured.Unstructured, n),
		clients: make([]*callerClient, n)}
	if err := env.Client.Create(b.Context(), r.cluster); err != nil {
		b.Fatal(err)
	}
	var wg sync.WaitGroup
	errs := make([]error, n)
	for i := range n {
		r.machines[i] = kubeenv.NewMachine(capi.V1Beta2, ns, name, fmt.Sprintf("%s-cp-%02d", name, i))
		r.clients[i] = &callerClient{Client: c.client}
		wg.Go(func() { errs[i] = env.Client.Create(b.Context(), r.machines[i]) })
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			b.Fatal(err)
		}
	}
	return r
}

// lockFunc makes one Lock call for caller i of r; cl is the Cluster as the
// caller sees it.
type lockFunc func(ctx context.Context, r *round, i int, cl *unstructured.Unstructured) (answer, error)

// run races the callers of r, checks the outcome and adds it to s.
func (r *round) run(b *testing.B, s *stats, lock lockFunc) {
	b.Helper()
	r.c.counter.Reset()
	out := race(b.Context(), len(r.machines), func(ctx context.Context, i, attempt int) (answer, error) {
		cl := r.cluster.DeepCopy()
		if attempt > 1 {
			if err := env.Client.Get(ctx, client.ObjectKeyFromObject(cl), cl); err != nil {
				return answer{}, err
			}
		}
		r.clients[i].reset()
		return lock(ctx, r, i, cl)
	})
	b.StopTimer()
	defer b.StartTimer()
	w := winner(b, r.c.name, out)
	reads, writes := r.c.counter.Reads(), r.c.counter.Writes()
	sent := reads + writes
	made := 0
	for _, c := range r.clients {
		made += int(c.requests.Load())
	}
	if made != sent {
		b.Fatalf("%s: the callers made %d requests, the API server was sent %d", r.c.name, made, sent)
	}
	r.check(b, out, w)
	s.add(out, w, made, writes)
	b.Logf("%s, %d callers: winner %s after %s; requests: %d get, %d create, %d patch, %d delete", r.c.name, len(out),
		r.machines[w].GetName(), out[w].took.Round(time.Millisecond), r.c.counter.Count("get"), r.c.counter.Count("create"),
		r.c.counter.Count("patch"), r.c.counter.Count("delete"))
}

// check verifies that the lock names the winner and, for initlock, that
// the grant register does and that no refused caller was told another name.
func (r *round) check(b *testing.B, out []outcome, w int) {
	b.Helper()
	want := r.machines[w].GetName()
	cm := &corev1.ConfigMap{}
	if err := env.Client.Get(b.Context(), client.ObjectKey{Namespace: r.cluster.GetNamespace(), Name: r.cluster.GetName() + "-lock"}, cm); err != nil {
		b.Fatalf("%s: reading the lock: %v", r.c.name, err)
	}
	var rec struct {
		MachineName string `json:"machineName"`
	}
	if err := json.Unmarshal([]byte(cm.Data["lock-information"]), &rec); err != nil || rec.MachineName != want {
		b.Fatalf("%s: the lock names %q (%v), the winner is %s", r.c.name, rec.MachineName, err, want)
	}
	if r.c.name != "initlock" {
		return
	}
	cl := r.cluster.DeepCopy()
	if err := env.Client.Get(b.Context(), client.ObjectKeyFromObject(cl), cl); err != nil {
		b.Fatal(err)
	}
	if g := wire.GrantFrom(cl.GetAnnotations()); !g.Held() || g.MachineName != want {
		b.Fatalf("initlock: the grant register is %s, the winner is %s", g.Raw(), want)
	}
	for i, o := range out {
		// A caller whose claim lost the race is refused at once, not told
		// the winner's name.
		if i != w && o.answer.holder != want && o.answer.holder != "" {
			b.Fatalf("initlock: caller %s was told %q holds the lock, the winner is %s", r.machines[i].GetName(), o.answer.holder, want)
		}
	}
}

// lockInitlock calls pkg/initlock's Lock.
func lockInitlock(ctx context.Context, r *round, i int, cl *unstructured.Unstructured) (answer, error) {
	res, err := initlock.New(r.clients[i]).Lock(ctx, cl, r.machines[i])
	if err != nil {
		return answer{}, err
	}
	// Refused with a time to call again, the caller waits that long, its
	// final answer here; refused with its own name as the holder, it tries
	// again.
	held := !res.Acquired && res.RetryAfter > 0 && res.Holder != r.machines[i].GetName()
	return answer{acquired: res.Acquired, held: held, holder: res.Holder}, nil
}

// lockUpstream calls the lock of CABPK v1.14.2 with typed objects, as
// CABPK does. It answers only true or false: false means that another
// Machine holds the lock when no request failed otherwise than a race
// lets it fail and the call deleted nothing (a lock whose holder is gone
// is deleted, and the caller refused).
func lockUpstream(ctx context.Context, r *round, i int, cl *unstructured.Unstructured) (answer, error) {
	var cluster clusterv1.Cluster
	var machine clusterv1.Machine
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(cl.Object, &cluster); err != nil {
		return answer{}, err
	}
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(r.machines[i].Object, &machine); err != nil {
		return answer{}, err
	}
	c := r.clients[i]
	ok := locking.NewControlPlaneInitMutex(c).Lock(ctx, &cluster, &machine)
	if !ok && (c.unexpected.Load() || c.deleted.Load()) {
		return answer{}, fmt.Errorf("upstream Lock refused %s after a failed request or a deletion", machine.Name)
	}
	return answer{acquired: ok, held: !ok}, nil
}
