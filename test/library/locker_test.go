package library_test

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/go-logr/logr"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/initlock/initlock/internal/kubeenv"
	"github.com/initlock/initlock/internal/kubeenv/wire"
	"github.com/initlock/initlock/pkg/initlock"
	"github.com/initlock/initlock/pkg/initlock/capi"
	"github.com/initlock/initlock/pkg/initlock/keeper"
)

// TestLock covers every path of Lock on the real API server (lockCases).
func TestLock(t *testing.T) { runLockCases(t, newFixture, (*fixture).lockWithLocker) }

// TestLockOnTheFakeClient runs every case of TestLock on
// controller-runtime's fake client set up by package initlocktest, where a
// provider's unit tests run the Locker: Lock answers and leaves the same
// there as on the API server (the fake client counts no request).
func TestLockOnTheFakeClient(t *testing.T) {
	runLockCases(t, newFakeFixture, (*fixture).lockWithLocker)
}

// runLockCases runs every case of lockCases on a fixture of newFixture,
// making the call with lock, which checks its answer against the case's
// and tells whether the caller acquired; then checks the requests and
// what the call left.
func runLockCases(t *testing.T, newFixture func(testing.TB) *fixture, lock func(*fixture, *testing.T, *unstructured.Unstructured, lockWant) bool) {
	for _, tt := range lockCases {
		t.Run(tt.name, func(t *testing.T) {
			f := newFixture(t)
			m := tt.setup(f)
			before := ""
			if cm := kubeenv.MustGetLock(f.t, f.admin, f.ns, "c1"); cm != nil {
				before = cm.ResourceVersion
			}
			f.counter.Reset()
			acquired := lock(f, t, m, tt.want)
			w := tt.want
			if w.err != nil {
				if cm := kubeenv.MustGetLock(f.t, f.admin, f.ns, "c1"); cm != nil && cm.ResourceVersion != before {
					t.Errorf("Lock() changed the configmap it refused")
				}
			}
			if r, wr := f.counter.Reads(), f.counter.Writes(); !f.fake && (r != w.reads || wr != w.writes) {
				t.Errorf("Lock() made %d reads and %d writes, want %d and %d", r, wr, w.reads, w.writes)
			}
			if g := f.grant(); !acquired && g.Held() && g.MachineName == m.GetName() {
				t.Errorf("refused caller %s left its grant in the register", m.GetName())
			}
			if tt.check != nil {
				tt.check(t, f)
			}
		})
	}
}

// lockWithLocker makes m's Lock through f.locker, checks its error and
// Result against w, and tells whether m acquired.
func (f *fixture) lockWithLocker(t *testing.T, m *unstructured.Unstructured, w lockWant) bool {
	res, err := f.locker.Lock(t.Context(), f.cluster, m)
	if w.err != nil && !errors.Is(err, w.err) {
		t.Fatalf("Lock() error = %v, want %v", err, w.err)
	} else if w.err == nil && err != nil {
		t.Fatalf("Lock() error = %v", err)
	}
	if res.Acquired != w.acquired || res.Holder != w.holder || (w.err == nil && res.Action != w.action) {
		t.Errorf("Lock() = %+v, want acquired=%v holder=%s action=%s", res, w.acquired, w.holder, w.action)
	}
	return res.Acquired
}

// TestLockKeepsTheCallerObjectConsistent: after Lock and Unlock, of the
// Locker and of the drop-in mutex, the caller's Cluster object carries the
// register and the resourceVersion the API server returned, so that the
// caller's next update of it succeeds; a stale object is left untouched.
func TestLockKeepsTheCallerObjectConsistent(t *testing.T) {
	type call = func(f *fixture, m *unstructured.Unstructured) bool
	for _, tc := range []struct {
		name         string
		lock, unlock call
	}{{
		name: "Locker",
		lock: func(f *fixture, m *unstructured.Unstructured) bool { return f.mustLock(m).Acquired },
		unlock: func(f *fixture, m *unstructured.Unstructured) bool {
			err := f.locker.Unlock(f.ctx(), f.cluster, m)
			if err != nil {
				f.t.Error(err)
			}
			return err == nil
		},
	}, {
		name: "mutex",
		lock: func(f *fixture, m *unstructured.Unstructured) bool {
			return newMutex(f.client).Lock(logr.NewContext(f.ctx(), logr.Discard()), f.cluster, m)
		},
		unlock: func(f *fixture, _ *unstructured.Unstructured) bool {
			return newMutex(f.client).Unlock(logr.NewContext(f.ctx(), logr.Discard()), f.cluster)
		},
	}} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t)
			m := f.machine("m1")
			if !tc.lock(f, m) {
				t.Fatal("Lock() did not acquire a free lock")
			}
			if g := wire.GrantFrom(f.cluster.GetAnnotations()); !g.Held() || g.MachineName != "m1" {
				t.Fatalf("caller's object register = %s, want the grant to m1", g.Raw())
			}
			f.cluster.SetLabels(map[string]string{"user": "edit"})
			if err := env.Client.Update(t.Context(), f.cluster); err != nil {
				t.Fatalf("Update of the caller's object after Lock: %v", err)
			}
			if !tc.unlock(f, m) {
				t.Fatal("Unlock() failed")
			}
			if g := wire.GrantFrom(f.cluster.GetAnnotations()); g.Held() {
				t.Errorf("caller's object register = %s after Unlock, want released", g.Raw())
			}
			f.cluster.SetLabels(map[string]string{"user": "edit-again"})
			if err := env.Client.Update(t.Context(), f.cluster); err != nil {
				t.Fatalf("Update of the caller's object after Unlock: %v", err)
			}

			// A stale object: the Cluster changed since it was read.
			stale := f.get(f.cluster)
			f.update(func(u *unstructured.Unstructured) { u.SetLabels(map[string]string{"user": "someone-else"}) })
			rv := stale.GetResourceVersion()
			if _, err := f.locker.Lock(t.Context(), stale, m); err != nil {
				t.Fatal(err)
			}
			if stale.GetResourceVersion() != rv {
				t.Errorf("a stale caller object was given resourceVersion %s; it must be left untouched", stale.GetResourceVersion())
			}
			f.expectHeld(t, "m1")
		})
	}
}

func TestLockInvalidNames(t *testing.T) {
	f := newFixture(t)
	m := f.machine("m1")
	for _, name := range []string{strings.Repeat("c", 64), strings.Repeat("c", 250), "Bad_Name"} {
		c := kubeenv.NewCluster(capi.V1Beta2, f.ns, name)
		f.counter.Reset()
		_, err := f.locker.Lock(t.Context(), c, m)
		if !errors.Is(err, initlock.ErrInvalidName) {
			t.Errorf("Lock(cluster %.10s...) error = %v, want ErrInvalidName", name, err)
		}
		if n := f.counter.Count("get", "list", "create", "update", "patch", "delete"); n != 0 {
			t.Errorf("Lock(cluster %.10s...) made %d requests before failing, want 0", name, n)
		}
	}
	other := kubeenv.NewMachine(capi.V1Beta2, "elsewhere", "c1", "m9")
	if _, err := f.locker.Lock(t.Context(), f.cluster, other); !errors.Is(err, initlock.ErrInvalidName) {
		t.Errorf("Lock(machine in another namespace) error = %v, want ErrInvalidName", err)
	}
}

func TestErrorNamesTheObjectAndTheWayOut(t *testing.T) {
	f := newFixture(t)
	f.foreign(map[string]string{"user-data": "x"}, nil)
	_, err := f.locker.Lock(t.Context(), f.cluster, f.machine("m1"))
	want := fmt.Sprintf(`namespace %q: configmap "c1-lock": not an init lock (no %s label)`, f.ns, capi.ClusterNameLabel)
	if err == nil || !strings.HasPrefix(err.Error(), want) || !strings.Contains(err.Error(), "refusing to touch it") {
		t.Fatalf("error = %v\nwant it to start with %s and say it refuses to touch it", err, want)
	}
}

func TestUnlock(t *testing.T) {
	// The holder's release writes the release mark (the only delete
	// initlock's lock guard lets through is of a marked lock), then deletes
	// the lock; another Machine then takes it.
	t.Run("holder releases: grant retired, then withdrawn and lock deleted", func(t *testing.T) {
		f := newFixture(t)
		m := f.machine("m1")
		f.mustLock(m)
		f.counter.Reset()
		if err := f.locker.Unlock(t.Context(), f.cluster, m); err != nil {
			t.Fatal(err)
		}
		// GET lock ∥ GET Cluster; GET caller (after them: an object from
		// before a restore is refused); PATCH register (retired); PATCH
		// register (withdrawn); PATCH lock (the release mark); DELETE lock,
		// each decided on what the write before answered.
		f.counts(t, "Unlock(m1)", 3, 4)
		if cm := kubeenv.MustGetLock(f.t, env.Client, f.ns, "c1"); cm != nil {
			t.Fatalf("lock still exists (annotations %v)", cm.Annotations)
		}
		f.expectGrant(t, "")
		if g := wire.GrantFrom(f.cluster.GetAnnotations()); g.Held() {
			t.Error("the caller's cluster object still shows the grant")
		}
		res, err := f.locker.Lock(t.Context(), f.cluster, f.machine("m2"))
		expectAcquired(t, "m2", res, err)
	})
	t.Run("missing lock is success", func(t *testing.T) {
		f := newFixture(t)
		if err := f.locker.Unlock(t.Context(), f.cluster, f.machine("m1")); err != nil {
			t.Fatal(err)
		}
	})
	t.Run("another machine's lock is not released", func(t *testing.T) {
		f := newFixture(t)
		f.mustLock(f.machine("m1"))
		err := f.locker.Unlock(t.Context(), f.cluster, f.machine("m2"))
		if !errors.Is(err, initlock.ErrNotHolder) {
			t.Fatalf("Unlock error = %v, want ErrNotHolder", err)
		}
		f.expectHeld(t, "m1")
	})
	t.Run("AnyHolder releases another machine's lock", func(t *testing.T) {
		f := newFixture(t)
		f.mustLock(f.machine("m1"))
		if err := f.locker.Unlock(t.Context(), f.cluster, nil, initlock.AnyHolder()); err != nil {
			t.Fatal(err)
		}
		if kubeenv.MustGetLock(f.t, env.Client, f.ns, "c1") != nil {
			t.Error("lock still exists")
		}
		f.expectGrant(t, "")
	})
	t.Run("a foreign configmap is never deleted", func(t *testing.T) {
		f := newFixture(t)
		f.foreign(map[string]string{"user-data": "precious"}, nil)
		err := f.locker.Unlock(t.Context(), f.cluster, nil, initlock.AnyHolder())
		if !errors.Is(err, initlock.ErrNotALock) {
			t.Fatalf("Unlock error = %v, want ErrNotALock", err)
		}
		if cm := kubeenv.MustGetLock(f.t, env.Client, f.ns, "c1"); cm == nil || cm.Data["user-data"] != "precious" {
			t.Error("foreign configmap was changed or deleted")
		}
	})
	t.Run("a corrupt lock is released only with AnyHolder", func(t *testing.T) {
		f := newFixture(t)
		f.foreign(map[string]string{"lock-information": "garbage"}, map[string]string{capi.ClusterNameLabel: "c1"})
		if err := f.locker.Unlock(t.Context(), f.cluster, f.machine("m1")); !errors.Is(err, initlock.ErrCorruptLock) {
			t.Fatalf("Unlock error = %v, want ErrCorruptLock", err)
		}
		if err := f.locker.Unlock(t.Context(), f.cluster, nil, initlock.AnyHolder()); err != nil {
			t.Fatal(err)
		}
		if kubeenv.MustGetLock(f.t, env.Client, f.ns, "c1") != nil {
			t.Error("corrupt lock still exists")
		}
	})
	t.Run("an operator's release refuses a lock that changed since it was inspected", func(t *testing.T) {
		f := newFixture(t)
		m := f.machine("m1")
		f.mustLock(m)
		seen, err := keeper.Inspect(t.Context(), f.client, keeper.Query{Namespace: f.ns, Cluster: "c1", CAPIVersion: capi.V1Beta2, Release: true, Force: true})
		if err != nil || !seen.Writes {
			t.Fatalf("Inspect: %+v, %v", seen, err)
		}
		cm := f.lockCM()
		cm.Annotations = map[string]string{"touched": "yes"}
		if err := env.Client.Update(t.Context(), cm); err != nil {
			t.Fatal(err)
		}
		err = keeper.Release(t.Context(), f.client, seen)
		if !apierrors.IsConflict(err) {
			t.Fatalf("Unlock error = %v, want a conflict", err)
		}
		f.expectHeld(t, "m1")
	})
	t.Run("while paused, nothing is released", func(t *testing.T) {
		f := newFixture(t)
		m := f.machine("m1")
		f.mustLock(m)
		f.update(func(u *unstructured.Unstructured) { _ = unstructured.SetNestedField(u.Object, true, "spec", "paused") })
		f.counter.Reset()
		if err := f.locker.Unlock(t.Context(), f.cluster, m); !errors.Is(err, initlock.ErrClusterPaused) {
			t.Fatalf("Unlock error = %v, want ErrClusterPaused", err)
		}
		if w := f.counter.Writes(); w != 0 {
			t.Errorf("Unlock made %d writes on a paused cluster", w)
		}
		f.expectHeld(t, "m1")
	})
	t.Run("a lock changed since it was read is not deleted", func(t *testing.T) {
		f := newFixture(t)
		m := f.machine("m1")
		f.mustLock(m)
		cm := f.lockCM()
		stale := cm.DeepCopy()
		cm.Annotations = map[string]string{"touched": "yes"}
		if err := env.Client.Update(t.Context(), cm); err != nil {
			t.Fatal(err)
		}
		err := env.Client.Delete(t.Context(), stale, client.Preconditions{UID: &stale.UID, ResourceVersion: &stale.ResourceVersion})
		if !apierrors.IsConflict(err) {
			t.Fatalf("delete with a stale resourceVersion precondition: %v, want a conflict", err)
		}
	})
}
