// Package managertest helps tests and benchmarks run the initlock manager
// in-process against a real API server: Start builds it with the options a
// test wants and runs it with kubeenv's StartManager, which counts its
// requests (kubeenv.Counter: exact counts by verb, resource, namespace and
// status, and the requests refused by authorisation); plus helpers to create
// Clusters and Machines, to restore a Cluster's lock with kubeenv's Velero
// simulator, to wait for events, to assert the writes counted, to read the
// process's metrics and to query the manager's HTTP endpoints.
//
// It is test support: it calls t.Fatal on unexpected errors and guarantees
// nothing about production use.
package managertest

import (
	"cmp"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/rest"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/metrics"

	"github.com/initlock/initlock/internal/kubeenv"
	"github.com/initlock/initlock/internal/kubeenv/velerosim"
	"github.com/initlock/initlock/internal/kubeenv/wire"
	"github.com/initlock/initlock/internal/manager"
)

// Options are the options of a manager started by a test: one namespace
// (all when empty), no servers, no leader election, the rest.Config's rate
// limits.
func Options(namespace string) manager.Options {
	o := manager.DefaultOptions()
	o.Namespace = namespace
	o.MetricsBindAddress = "0"
	o.HealthProbeBindAddress = "0"
	o.KubeAPIQPS, o.KubeAPIBurst = 0, 0 // keep the Env's
	return o
}

// Start builds a manager for cfg with opts, counting its requests, starts
// it, waits (a minute at most) for its cache to sync and stops it when t
// ends.
func Start(t testing.TB, cfg *rest.Config, opts manager.Options) *kubeenv.Running {
	t.Helper()
	rm := StartNoWait(t, cfg, opts)
	rm.WaitForCacheSync(t)
	return rm
}

// StartNoWait is Start without waiting for the cache.
func StartNoWait(t testing.TB, cfg *rest.Config, opts manager.Options) *kubeenv.Running {
	t.Helper()
	return kubeenv.StartManager(t, cfg, func(cfg *rest.Config) (ctrl.Manager, error) { return manager.New(cfg, opts) })
}

// CreateCluster creates a Cluster of the given version, changed by mutate
// first.
func CreateCluster(t testing.TB, c client.Client, version, ns, name string, mutate ...func(*unstructured.Unstructured)) *unstructured.Unstructured {
	t.Helper()
	u := kubeenv.NewCluster(version, ns, name)
	for _, m := range mutate {
		m(u)
	}
	if err := c.Create(t.Context(), u); err != nil {
		t.Fatalf("creating cluster %s/%s: %v", ns, name, err)
	}
	return u
}

// CreateMachine creates a control-plane Machine of cluster.
func CreateMachine(t testing.TB, c client.Client, version, ns, cluster, name string) *unstructured.Unstructured {
	t.Helper()
	u := kubeenv.NewMachine(version, ns, cluster, name)
	if err := c.Create(t.Context(), u); err != nil {
		t.Fatalf("creating machine %s/%s: %v", ns, name, err)
	}
	return u
}

// Create creates objs, in order.
func Create(t testing.TB, c client.Client, objs ...client.Object) {
	t.Helper()
	for _, obj := range objs {
		if err := c.Create(t.Context(), obj); err != nil {
			t.Fatalf("creating %T %s/%s: %v", obj, obj.GetNamespace(), obj.GetName(), err)
		}
	}
}

// RestoreAndExpectAdoption restores into env, with kubeenv's Velero
// simulator, the lock of a Cluster named cluster held by cluster+"-cp-0"
// without ownerReferences, that Machine and the Cluster, then waits a
// minute at most for a running manager to make the Cluster own the lock.
// It returns the Cluster.
func RestoreAndExpectAdoption(t testing.TB, env *kubeenv.Env, version, ns, cluster string) *unstructured.Unstructured {
	t.Helper()
	holder := cluster + "-cp-0"
	var cl *unstructured.Unstructured
	for _, u := range velerosim.Restore[client.Object](t, env.Config, velerosim.Options{}, kubeenv.NewLock(ns, cluster, holder, nil),
		kubeenv.NewMachine(version, ns, cluster, holder), kubeenv.NewCluster(version, ns, cluster)) {
		if u.GetKind() == "Cluster" {
			cl = u
		}
	}
	kubeenv.Eventually(t, 60*time.Second, func() error {
		cm, err := kubeenv.GetLock(t.Context(), env.Client, ns, cluster)
		if err != nil {
			return err
		}
		return kubeenv.LockOwnedBy(cm, cl)
	})
	return cl
}

// Events returns the events.k8s.io Events in ns with the given reason.
func Events(t testing.TB, c client.Client, ns, reason string) []eventsv1.Event {
	t.Helper()
	var list eventsv1.EventList
	if err := c.List(t.Context(), &list, client.InNamespace(ns)); err != nil {
		t.Fatalf("listing events: %v", err)
	}
	var out []eventsv1.Event
	for _, e := range list.Items {
		if e.Reason == reason {
			out = append(out, e)
		}
	}
	return out
}

// EventOn waits for an event with reason regarding the named object of the
// given kind.
func EventOn(t testing.TB, c client.Client, ns, reason, kind, name string) eventsv1.Event {
	t.Helper()
	var found eventsv1.Event
	kubeenv.Eventually(t, 20*time.Second, func() error {
		for _, e := range Events(t, c, ns, reason) {
			if e.Regarding.Kind == kind && e.Regarding.Name == name {
				found = e
				return nil
			}
		}
		return fmt.Errorf("no %s event on %s %s", reason, kind, name)
	})
	return found
}

// WantWrites fails t unless the manager rm made exactly want writes of
// resource in ns (every resource, every namespace, when empty); why says
// which writes are wanted.
func WantWrites(t testing.TB, rm *kubeenv.Running, resource, ns string, want int, why string) {
	t.Helper()
	if n := rm.Counter.Of(resource, ns).Writes(); n != want {
		t.Fatalf("%s writes = %d, want %d %s:\n%s", cmp.Or(resource, "all"), n, want, why, rm.Counter)
	}
}

// NoWrites returns, for kubeenv.Consistently, a check that the manager rm
// has made no write of resource in ns (every resource, every namespace,
// when empty).
func NoWrites(rm *kubeenv.Running, resource, ns string) func() error {
	return func() error {
		if n := rm.Counter.Of(resource, ns).Writes(); n != 0 {
			return fmt.Errorf("%d %s writes, want none:\n%s", n, cmp.Or(resource, "all"), rm.Counter)
		}
		return nil
	}
}

// MetricValue sums the samples of the counter or gauge name, in
// controller-runtime's registry, whose labels include every "name=value"
// of labels: 0 when there is none.
func MetricValue(t testing.TB, name string, labels ...string) float64 {
	t.Helper()
	families, err := metrics.Registry.Gather()
	if err != nil {
		t.Fatalf("gathering metrics: %v", err)
	}
	sum := 0.0
	for _, f := range families {
		if f.GetName() != name {
			continue
		}
		for _, m := range f.GetMetric() {
			if hasLabels(m, labels) { // a counter's or a gauge's: the other reads 0
				sum += m.GetCounter().GetValue() + m.GetGauge().GetValue()
			}
		}
	}
	return sum
}

func hasLabels(m *dto.Metric, labels []string) bool {
	have := map[string]string{}
	for _, l := range m.GetLabel() {
		have[l.GetName()] = l.GetValue()
	}
	for _, want := range labels {
		k, v, _ := strings.Cut(want, "=")
		if have[k] != v {
			return false
		}
	}
	return true
}

// HTTPGet sends GET url, with token as a bearer token when it is not
// empty, and returns the status code and the body. It trusts any
// certificate: the manager serves a self-signed one by default.
func HTTPGet(t testing.TB, url, token string) (int, string, error) {
	req, err := http.NewRequestWithContext(t.Context(), http.MethodGet, url, nil)
	if err != nil {
		return 0, "", err
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	c := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}} //nolint:gosec // a self-signed test certificate
	resp, err := c.Do(req)
	if err != nil {
		return 0, "", err
	}
	defer func() { _ = resp.Body.Close() }()
	b, err := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b), err
}

// GetOK waits, timeout at most, for GET url (HTTPGet) to answer 200 OK, and
// returns the body of that answer.
func GetOK(t testing.TB, timeout time.Duration, url, token string) string {
	t.Helper()
	var body string
	kubeenv.Eventually(t, timeout, func() error {
		code, b, err := HTTPGet(t, url, token)
		if err == nil && code != http.StatusOK {
			err = fmt.Errorf("GET %s: %d %s", url, code, b)
		}
		body = b
		return err
	})
	return body
}

// OrphanCollection runs a manager, with a grace period of 2 s and no settle
// time, over a lock whose Cluster (of Cluster API version) is absent, in a
// namespace of env's own. The absence is marked on the lock with one write;
// the lock is kept while its holder Machine exists, three grace periods
// long; once the Machine is gone it is collected, with an
// OrphanLockCollected event and three writes in all (the absence, the
// release mark, the delete). The metrics count the mark and the collection,
// and the collection was confirmed by a live read of the Cluster.
func OrphanCollection(t *testing.T, env *kubeenv.Env, version string) {
	ns := env.Namespace(t)
	machine := CreateMachine(t, env.Client, version, ns, "gone", "gone-cp-0")
	Create(t, env.Client, kubeenv.NewLock(ns, "gone", "gone-cp-0", nil))
	opts := Options(ns)
	opts.OrphanGrace, opts.OrphanSettle = 2*time.Second, 0
	rm := Start(t, env.Config, opts)
	collected0, marked0 := MetricValue(t, "initlock_orphan_locks_collected_total"), MetricValue(t, "initlock_lock_absence_marks_total")
	lock := func(check func(*corev1.ConfigMap) error) func() error {
		return func() error {
			cm, err := kubeenv.GetLock(t.Context(), env.Client, ns, "gone")
			if err != nil || cm == nil {
				return cmp.Or(err, errors.New("no lock"))
			}
			return check(cm)
		}
	}
	kubeenv.Eventually(t, 20*time.Second, lock(func(cm *corev1.ConfigMap) error {
		if _, ok := cm.Annotations[wire.ClusterAbsentAnnotation]; !ok {
			return errors.New("lock not marked yet")
		}
		return nil
	}))
	kubeenv.Consistently(t, 3*opts.OrphanGrace, lock(func(*corev1.ConfigMap) error { return nil }))
	WantWrites(t, rm, "configmaps", ns, 1, "(the mark)")
	if d := MetricValue(t, "initlock_lock_absence_marks_total") - marked0; d != 1 {
		t.Fatalf("absence marks metric grew by %v, want 1", d)
	}

	kubeenv.DeleteAndWait(t, env.Client, machine)
	kubeenv.Eventually(t, 20*time.Second, kubeenv.LockGone(t.Context(), env.Client, ns, "gone"))
	EventOn(t, env.Client, ns, "OrphanLockCollected", "ConfigMap", "gone-lock")
	WantWrites(t, rm, "configmaps", ns, 3, "(the absence, the release mark, the delete)")
	if d := MetricValue(t, "initlock_orphan_locks_collected_total") - collected0; d != 1 {
		t.Fatalf("collected metric grew by %v, want 1", d)
	}
	if n := rm.Counter.Of("clusters", ns).Count("get"); n == 0 {
		t.Fatalf("no live read of the Cluster: the collection was not confirmed:\n%s", rm.Counter)
	}
}
