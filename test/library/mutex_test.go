package library_test

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"

	"github.com/go-logr/logr/funcr"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/initlock/initlock/internal/kubeenv"
	"github.com/initlock/initlock/pkg/initlock"
	"github.com/initlock/initlock/pkg/initlock/capi"
	"github.com/initlock/initlock/pkg/initlock/locking"
)

type mutex = locking.ControlPlaneInitMutex[*unstructured.Unstructured, *unstructured.Unstructured]

func newMutex(c client.Client) *mutex {
	return locking.NewControlPlaneInitMutex[*unstructured.Unstructured, *unstructured.Unstructured](c)
}

// logs records the messages logged through a context, at every level up
// to 4.
type logs struct {
	mu    sync.Mutex
	lines []string
}

func (l *logs) into(ctx context.Context) context.Context {
	return ctrl.LoggerInto(ctx, funcr.New(func(prefix, args string) {
		l.mu.Lock()
		defer l.mu.Unlock()
		l.lines = append(l.lines, args)
	}, funcr.Options{Verbosity: 4}))
}

// has tells whether a line with message msg (and, when error, an error)
// was logged.
func (l *logs) has(msg string, withError bool) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, line := range l.lines {
		if strings.Contains(line, `"msg"="`+msg+`"`) && strings.Contains(line, `"error"=`) == withError {
			return true
		}
	}
	return false
}

func (l *logs) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return strings.Join(l.lines, "\n")
}

// TestMutexLock runs every case of TestLock through the drop-in mutex: it
// makes the same requests and leaves the same state, answers true exactly
// when Locker.Lock acquires, and logs why it answers false.
func TestMutexLock(t *testing.T) { runLockCases(t, newFixture, (*fixture).lockWithMutex) }

// lockWithMutex makes m's Lock through the drop-in mutex, checks its answer
// and the line it logs against w, and tells whether m acquired.
func (f *fixture) lockWithMutex(t *testing.T, m *unstructured.Unstructured, w lockWant) bool {
	var l logs
	got := newMutex(f.client).Lock(l.into(t.Context()), f.cluster, m)
	if got != w.acquired {
		t.Errorf("Lock() = %v, want %v", got, w.acquired)
	}
	var msg string
	withError := false
	switch {
	case errors.Is(w.err, initlock.ErrClusterPaused):
		msg = "Cluster is paused, not taking the init lock"
	case w.err != nil:
		msg, withError = "Failed to acquire the init lock", true
	case !w.acquired:
		msg = "Waiting for the machine holding the init lock to initialize"
	default:
		msg = "Init lock acquired"
	}
	if !l.has(msg, withError) {
		t.Errorf("Lock() did not log %q (error: %v); logged:\n%s", msg, withError, &l)
	}
	return got
}

// TestMutexUnlock: Unlock releases the lock whoever holds it, as the
// provider's join path means it, and never a ConfigMap that is not a lock.
func TestMutexUnlock(t *testing.T) {
	tests := []struct {
		name  string
		setup func(f *fixture)
		want  bool
		// reads and writes Unlock makes: GET lock ∥ GET Cluster, then the
		// release's writes (the lock's: its release mark, then its delete).
		reads, writes int
		logged        string
		gone          bool
	}{{
		name:  "the lock of the machine that ran init: register retired, then emptied and lock deleted",
		setup: func(f *fixture) { f.mustLock(f.machine("m1")) },
		want:  true, reads: 2, writes: 4, gone: true,
	}, {
		name: "join path, held by another machine: released all the same",
		setup: func(f *fixture) {
			f.mustLock(f.machine("m1"))
			f.machine("m2")
		},
		want: true, reads: 2, writes: 4, gone: true,
	}, {
		name:  "an upstream lock: deleted with preconditions",
		setup: func(f *fixture) { f.upstreamLock("m1", f.clusterRef()) },
		want:  true, reads: 2, writes: 2, gone: true,
	}, {
		name:  "no lock: released already",
		setup: func(f *fixture) {},
		want:  true, reads: 2, writes: 0, gone: true,
	}, {
		name: "a corrupt lock: released",
		setup: func(f *fixture) {
			f.foreign(map[string]string{"lock-information": "garbage"}, map[string]string{capi.ClusterNameLabel: "c1"})
		},
		want: true, reads: 2, writes: 2, gone: true,
	}, {
		name:  "a configmap that is not a lock: never deleted",
		setup: func(f *fixture) { f.foreign(map[string]string{"user-data": "precious"}, nil) },
		want:  false, reads: 2, writes: 0, logged: "Refusing to release a ConfigMap that is not an init lock",
	}, {
		name: "paused cluster: nothing written",
		setup: func(f *fixture) {
			f.mustLock(f.machine("m1"))
			f.cluster = f.update(func(u *unstructured.Unstructured) { _ = unstructured.SetNestedField(u.Object, true, "spec", "paused") })
		},
		want: false, reads: 2, writes: 0, logged: "Cluster is paused, not releasing the init lock",
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newFixture(t)
			tt.setup(f)
			f.checkCall(t, "Unlock", newMutex(f.client).Unlock, callWant{ok: tt.want, reads: tt.reads, writes: tt.writes,
				logged: tt.logged, withError: tt.logged != "Cluster is paused, not releasing the init lock"})
			if gone := kubeenv.MustGetLock(f.t, env.Client, f.ns, "c1") == nil; gone != tt.gone {
				t.Errorf("lock gone = %v, want %v", gone, tt.gone)
			}
			if tt.gone {
				f.expectGrant(t, "")
			}
		})
	}
}

// callWant is what a call of the mutex that takes only the Cluster (Unlock,
// Adopt) answers, the requests it makes and the line it logs, if any.
type callWant struct {
	ok            bool
	reads, writes int
	logged        string
	withError     bool
}

// checkCall makes call on the fixture's Cluster and checks it against w.
func (f *fixture) checkCall(t *testing.T, name string, call func(context.Context, *unstructured.Unstructured) bool, w callWant) {
	t.Helper()
	var l logs
	f.counter.Reset()
	if got := call(l.into(t.Context()), f.cluster); got != w.ok {
		t.Errorf("%s() = %v, want %v; logged:\n%s", name, got, w.ok, &l)
	}
	if r, wr := f.counter.Reads(), f.counter.Writes(); r != w.reads || wr != w.writes {
		t.Errorf("%s() made %d reads and %d writes, want %d and %d", name, r, wr, w.reads, w.writes)
	}
	if w.logged != "" && !l.has(w.logged, w.withError) {
		t.Errorf("%s() did not log %q; logged:\n%s", name, w.logged, &l)
	}
}
