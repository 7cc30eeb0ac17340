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
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	eventsv1 "k8s.io/api/events/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/rest"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/metrics"

	"github.com/initlock/initlock/internal/kubeenv"
	"github.com/initlock/initlock/internal/kubeenv/velerosim"
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
