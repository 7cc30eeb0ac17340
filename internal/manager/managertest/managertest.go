// Package managertest helps tests, benchmarks and demos run the initlock
// manager in-process against a real API server: a request counter wrapped
// around the manager's rest.Config (exact write counts by verb, resource and
// namespace, and the requests refused by authorisation), Start and Stop, and
// builders for Clusters, Machines and locks in the shapes a restore leaves.
//
// It is test support: it calls t.Fatal on unexpected errors and guarantees
// nothing about production use.
package managertest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/rest"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"

	"github.com/initlock/initlock/internal/kubeenv"
	"github.com/initlock/initlock/internal/kubeenv/velerosim"
	"github.com/initlock/initlock/internal/manager"
	"github.com/initlock/initlock/pkg/initlock/engine"
)

// SetLogger sends controller-runtime's logs to stderr when INITLOCK_TEST_LOG
// is set, and discards them otherwise.
func SetLogger() {
	w := io.Discard
	if os.Getenv("INITLOCK_TEST_LOG") != "" {
		w = os.Stderr
	}
	ctrl.SetLogger(zap.New(zap.WriteTo(w), zap.UseDevMode(true)))
}

// Counter counts the requests made through the rest.Config it wraps, by
// verb, resource and namespace.
type Counter struct {
	mu        sync.Mutex
	counts    map[kubeenv.Request]int
	forbidden []string
}

// Wrap returns a copy of cfg whose requests c counts.
func (c *Counter) Wrap(cfg *rest.Config) *rest.Config {
	out := rest.CopyConfig(cfg)
	out.Wrap(func(rt http.RoundTripper) http.RoundTripper {
		return kubeenv.RoundTripperFunc(func(req *http.Request) (*http.Response, error) {
			c.add(kubeenv.Classify(req))
			resp, err := rt.RoundTrip(req)
			if err == nil && resp.StatusCode == http.StatusForbidden {
				b, _ := io.ReadAll(resp.Body)
				_ = resp.Body.Close()
				resp.Body = io.NopCloser(bytes.NewReader(b))
				// Writes into a namespace being deleted are refused with
				// 403 too; only authorisation failures count.
				if !bytes.Contains(b, []byte("NamespaceTerminating")) {
					c.deny(req.Method + " " + req.URL.Path + ": " + string(b))
				}
			}
			return resp, err
		})
	})
	return out
}

func (c *Counter) add(k kubeenv.Request) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.counts == nil {
		c.counts = map[kubeenv.Request]int{}
	}
	c.counts[k]++
}

func (c *Counter) deny(what string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.forbidden = append(c.forbidden, what)
}

// Denied returns the requests the API server refused with 403 Forbidden.
func (c *Counter) Denied() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]string(nil), c.forbidden...)
}

// Reset sets every count to zero.
func (c *Counter) Reset() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.counts = nil
}

// Count returns the requests matching verbs (all when empty), resource ("" for
// any) and namespace ("" for any).
func (c *Counter) Count(resource, namespace string, verbs ...string) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	n := 0
	for k, v := range c.counts {
		if resource != "" && k.Resource != resource {
			continue
		}
		if namespace != "" && k.Namespace != namespace {
			continue
		}
		if len(verbs) > 0 && !slices.Contains(verbs, k.Verb) {
			continue
		}
		n += v
	}
	return n
}

// WriteVerbs are the verbs that change objects.
var WriteVerbs = []string{"create", "update", "patch", "delete"}

// Writes counts create, update, patch and delete requests.
func (c *Counter) Writes(resource, namespace string) int {
	return c.Count(resource, namespace, WriteVerbs...)
}

// String lists the counts, one a line.
func (c *Counter) String() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	var b strings.Builder
	for k, v := range c.counts {
		fmt.Fprintf(&b, "%s %s ns=%s: %d\n", k.Verb, k.Resource, k.Namespace, v)
	}
	return b.String()
}

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

// Running is a manager started by a test.
type Running struct {
	Manager ctrl.Manager
	// Counter counts the manager's requests.
	Counter *Counter
	cancel  context.CancelFunc
	done    chan error
}

// Start builds a manager for cfg with opts, counting its requests, starts
// it, waits (a minute at most) for its cache to sync and stops it when t
// ends.
func Start(t testing.TB, cfg *rest.Config, opts manager.Options) *Running {
	t.Helper()
	rm := StartNoWait(t, cfg, opts)
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	if !rm.Manager.GetCache().WaitForCacheSync(ctx) {
		t.Fatalf("manager cache did not sync within a minute; refused requests: %v", rm.Counter.Denied())
	}
	return rm
}

// StartNoWait is Start without waiting for the cache.
func StartNoWait(t testing.TB, cfg *rest.Config, opts manager.Options) *Running {
	t.Helper()
	c := &Counter{}
	mgr, err := manager.New(c.Wrap(cfg), opts)
	if err != nil {
		t.Fatalf("building the manager: %v", err)
	}
	ctx, cancel := context.WithCancel(context.WithoutCancel(t.Context()))
	rm := &Running{Manager: mgr, Counter: c, cancel: cancel, done: make(chan error, 1)}
	go func() { rm.done <- mgr.Start(ctx) }()
	t.Cleanup(rm.Stop)
	return rm
}

// Stop stops the manager and waits for it; it may be called more than once.
func (rm *Running) Stop() {
	rm.cancel()
	if rm.done == nil {
		return
	}
	if err := <-rm.done; err != nil && !errors.Is(err, context.Canceled) {
		fmt.Fprintf(os.Stderr, "manager stopped with an error: %v\n", err)
	}
	rm.done = nil
}

// CreateCluster creates a Cluster of the given version, then sets the
// status mutate gave it, if any.
func CreateCluster(t testing.TB, c client.Client, version, ns, name string, mutate ...func(*unstructured.Unstructured)) *unstructured.Unstructured {
	t.Helper()
	u := kubeenv.NewCluster(version, ns, name)
	for _, m := range mutate {
		m(u)
	}
	status, hasStatus := u.Object["status"]
	if err := c.Create(t.Context(), u); err != nil {
		t.Fatalf("creating cluster %s/%s: %v", ns, name, err)
	}
	if hasStatus {
		u.Object["status"] = status
		if err := c.Status().Update(t.Context(), u); err != nil {
			t.Fatalf("setting the status of cluster %s/%s: %v", ns, name, err)
		}
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

// Create creates obj.
func Create(t testing.TB, c client.Client, obj client.Object) {
	t.Helper()
	if err := c.Create(t.Context(), obj); err != nil {
		t.Fatalf("creating %T %s/%s: %v", obj, obj.GetNamespace(), obj.GetName(), err)
	}
}

// GetLock reads the lock of cluster.
func GetLock(t testing.TB, c client.Client, ns, cluster string) (*corev1.ConfigMap, error) {
	t.Helper()
	cm := &corev1.ConfigMap{}
	err := c.Get(t.Context(), types.NamespacedName{Namespace: ns, Name: cluster + engine.LockSuffix}, cm)
	return cm, err
}

// RestoreAndExpectAdoption creates, in Velero's order, the lock of a
// Cluster named cluster held by cluster+"-cp-0" without ownerReferences,
// that Machine and the Cluster, then waits a minute at most for a running
// manager to make the Cluster own the lock. It returns the Cluster.
func RestoreAndExpectAdoption(t testing.TB, c client.Client, version, ns, cluster string) *unstructured.Unstructured {
	t.Helper()
	Create(t, c, kubeenv.NewLock(ns, cluster, cluster+"-cp-0", nil))
	CreateMachine(t, c, version, ns, cluster, cluster+"-cp-0")
	cl := CreateCluster(t, c, version, ns, cluster)
	kubeenv.Eventually(t, 60*time.Second, func() error {
		cm, err := GetLock(t, c, ns, cluster)
		if err != nil {
			return err
		}
		return kubeenv.LockOwnedBy(cm, cl)
	})
	return cl
}

// LockGone returns a check that the lock of cluster does not exist.
func LockGone(t testing.TB, c client.Client, ns, cluster string) func() error {
	return func() error {
		_, err := GetLock(t, c, ns, cluster)
		if apierrors.IsNotFound(err) {
			return nil
		}
		if err != nil {
			return err
		}
		return fmt.Errorf("lock %s-lock still exists", cluster)
	}
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

// Restore re-creates objects through cfg as a Velero restore does, with the
// project's one simulator of it (velerosim): metadata reset, no
// ownerReferences or status, the restore labels added, in Velero's order.
func Restore(t testing.TB, cfg *rest.Config, objs ...client.Object) {
	t.Helper()
	items, err := velerosim.Unstructured(objs...)
	if err != nil {
		t.Fatal(err)
	}
	r, err := velerosim.New(cfg, velerosim.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := r.Restore(t.Context(), items); err != nil {
		t.Fatal(err)
	}
}
