package chaos_test

import (
	"errors"
	"net"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/initlock/initlock/internal/chaos"
	"github.com/initlock/initlock/internal/kubeenv"
	"github.com/initlock/initlock/internal/kubeenv/faults"
)

// recorder keeps what a callback is given; it is safe for concurrent use.
type recorder[T any] struct {
	mu   sync.Mutex
	seen []T
}

func (r *recorder[T]) add(x T) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.seen = append(r.seen, x)
}

func (r *recorder[T]) all() []T {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]T(nil), r.seen...)
}

func newClient(t *testing.T, cfg *rest.Config) client.Client {
	t.Helper()
	c, err := client.New(cfg, client.Options{Scheme: kubeenv.Scheme(), Mapper: env.Client.RESTMapper()})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func configMap(ns, name string) *corev1.ConfigMap {
	return &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}}
}

// TestInjector: each fault reaches the caller as the API error it imitates,
// a lost response hides a write that happened, and every ConfigMap delete is
// reported with the UID it was made for.
func TestInjector(t *testing.T) {
	ns := env.Namespace(t)
	var seen recorder[chaos.Deletion]
	cfg, inj := chaos.WrapConfig(env.Config, "bc-1", 1, seen.add)
	c := newClient(t, cfg)

	inj.SetFaults(chaos.Faults{Conflict: 1})
	if err := c.Create(t.Context(), configMap(ns, "a")); !apierrors.IsConflict(err) {
		t.Fatalf("create with conflicts: %v, want a Conflict", err)
	}
	if err := c.Get(t.Context(), client.ObjectKey{Namespace: ns, Name: "a"}, &corev1.ConfigMap{}); !apierrors.IsNotFound(err) {
		t.Fatalf("reads are not conflicted, and nothing was created: %v", err)
	}

	inj.SetFaults(chaos.Faults{ServerError: 1})
	err := c.Create(t.Context(), configMap(ns, "a"))
	if !apierrors.IsInternalError(err) && !apierrors.IsServiceUnavailable(err) && !apierrors.IsTimeout(err) {
		t.Fatalf("create with 5xx: %v, want a 5xx", err)
	}

	inj.SetFaults(chaos.Faults{Timeout: 1})
	var netErr net.Error
	if err := c.Create(t.Context(), configMap(ns, "a")); !errors.As(err, &netErr) || !netErr.Timeout() {
		t.Fatalf("create with timeouts: %v, want a network timeout", err)
	}

	inj.SetFaults(chaos.Faults{LostResponse: 1})
	if err := c.Create(t.Context(), configMap(ns, "lost")); err == nil {
		t.Fatalf("create with a lost response succeeded")
	}
	inj.SetFaults(chaos.Faults{})
	lost := &corev1.ConfigMap{}
	if err := c.Get(t.Context(), client.ObjectKey{Namespace: ns, Name: "lost"}, lost); err != nil {
		t.Fatalf("the write whose response was lost did not happen: %v", err)
	}
	if err := c.Delete(t.Context(), lost, client.Preconditions{UID: &lost.UID}); err != nil {
		t.Fatal(err)
	}
	got := seen.all()
	if len(got) != 1 || got[0].UID != lost.UID || got[0].Actor != "bc-1" || got[0].Code != 200 || got[0].Name != "lost" {
		t.Fatalf("deletions %+v, want one of uid %s by bc-1", got, lost.UID)
	}
	if s := inj.Stats(); s.ByClass[faults.Conflict] != 1 || s.ByClass[faults.ServerError] != 1 || s.ByClass[faults.Timeout] != 1 || s.ByClass[faults.LostResponse] != 1 {
		t.Fatalf("stats %+v, want one of each fault", s)
	}
}

// TestProxy: a client behind the proxy reads, writes and watches, and its
// deletes are reported.
func TestProxy(t *testing.T) {
	ns := env.Namespace(t)
	var seen recorder[chaos.Deletion]
	p, err := chaos.NewProxy(env.Config, chaos.ProxyHooks{OnDelete: seen.add})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = p.Close() })
	kubeconfig, _, err := p.Replica("mgr-1", t.TempDir(), 1)
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	if err != nil {
		t.Fatal(err)
	}
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	w, err := cs.CoreV1().ConfigMaps(ns).Watch(t.Context(), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Stop()
	c := newClient(t, cfg)
	cm := configMap(ns, "through-the-proxy")
	if err := c.Create(t.Context(), cm); err != nil {
		t.Fatal(err)
	}
	select {
	case ev := <-w.ResultChan():
		if ev.Type != watch.Added {
			t.Fatalf("watch event %s, want ADDED", ev.Type)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("the watch through the proxy delivered nothing")
	}
	if err := c.Delete(t.Context(), cm, client.Preconditions{UID: &cm.UID, ResourceVersion: &cm.ResourceVersion}); err != nil {
		t.Fatal(err)
	}
	if got := seen.all(); len(got) != 1 || got[0].UID != cm.UID || got[0].Actor != "mgr-1" {
		t.Fatalf("deletions %+v, want one of uid %s by mgr-1", got, cm.UID)
	}
	p.SetFaults(chaos.Faults{Conflict: 1})
	if err := c.Create(t.Context(), configMap(ns, "b")); !apierrors.IsConflict(err) {
		t.Fatalf("create through a faulty proxy: %v, want a Conflict", err)
	}
}

// TestLateWriteApplied: on the real API server, a create whose caller got
// an error is applied once the injector sends it.
func TestLateWriteApplied(t *testing.T) {
	ns := env.Namespace(t)
	cfg, inj := chaos.WrapConfig(env.Config, "bc-1", 1, nil)
	c := newClient(t, cfg)
	inj.SetFaults(chaos.Faults{LateWrite: 1, MaxLateDelay: 50 * time.Millisecond})
	if err := c.Create(t.Context(), configMap(ns, "late")); err == nil {
		t.Fatal("a held create succeeded for its caller")
	}
	inj.WaitLate()
	inj.SetFaults(chaos.Faults{})
	if err := c.Get(t.Context(), client.ObjectKey{Namespace: ns, Name: "late"}, &corev1.ConfigMap{}); err != nil {
		t.Fatalf("the held create was not applied afterwards: %v", err)
	}
	if s := inj.Stats(); s.ByClass[faults.LateWrite] != 1 || s.LateApplied != 1 {
		t.Fatalf("stats %+v, want one late write, applied", s)
	}
}
