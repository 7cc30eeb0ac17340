package library_test

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/initlock/initlock/internal/capi"
	"github.com/initlock/initlock/internal/kubeenv"
	"github.com/initlock/initlock/pkg/initlock"
)

// TestLock covers every path of Lock on the real API server, with the exact
// number of reads (GET) and writes (create, patch, delete, a failed one
// included) each makes. "∥" are requests made in parallel.
func TestLock(t *testing.T) {
	type want struct {
		acquired bool
		holder   string
		action   initlock.Action
		err      error
		reads    int
		writes   int
	}
	tests := []struct {
		name string
		// setup prepares the namespace and returns the machine to lock for.
		setup func(f *fixture) *unstructured.Unstructured
		want  want
		check func(t *testing.T, f *fixture)
	}{{
		name:  "free: the lock is created and the register claimed, in one round",
		setup: func(f *fixture) *unstructured.Unstructured { return f.machine("m1") },
		// CREATE lock ∥ PATCH register ∥ GET caller.
		want: want{acquired: true, holder: "m1", action: initlock.ActionCreate, reads: 1, writes: 2},
		check: func(t *testing.T, f *fixture) {
			cm := f.lockCM()
			if cm.Labels[capi.ClusterNameLabel] != "c1" {
				t.Errorf("lock labels = %v", cm.Labels)
			}
			if len(cm.OwnerReferences) != 1 || cm.OwnerReferences[0] != f.clusterRef() {
				t.Errorf("lock ownerReferences = %+v, want one to the cluster", cm.OwnerReferences)
			}
			f.expectHeld(t, "m1")
		},
	}, {
		name: "healthy re-lock by the holder: read live, no write",
		setup: func(f *fixture) *unstructured.Unstructured {
			m := f.machine("m1")
			f.mustLock(m)
			return m
		},
		// GET lock ∥ GET Cluster ∥ GET caller.
		want: want{acquired: true, holder: "m1", action: initlock.ActionNone, reads: 3, writes: 0},
	}, {
		name: "re-lock after the owner reference was stripped: re-adopted in one write",
		setup: func(f *fixture) *unstructured.Unstructured {
			m := f.machine("m1")
			f.mustLock(m)
			cm := f.lockCM()
			cm.OwnerReferences = nil
			if err := env.Client.Update(f.ctx(), cm); err != nil {
				t.Fatal(err)
			}
			return m
		},
		// GET lock ∥ GET Cluster ∥ GET caller, PATCH lock.
		want: want{acquired: true, holder: "m1", action: initlock.ActionAdopt, reads: 3, writes: 1},
		check: func(t *testing.T, f *fixture) {
			if refs := f.lockCM().OwnerReferences; len(refs) != 1 || refs[0] != f.clusterRef() {
				t.Errorf("lock ownerReferences = %+v, want one to the cluster", refs)
			}
			f.expectHeld(t, "m1")
		},
	}, {
		name: "stale owner UID is replaced and other owners are kept",
		setup: func(f *fixture) *unstructured.Unstructured {
			m := f.machine("m1")
			f.mustLock(m)
			keep := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: f.ns, Name: "keep-me"}}
			if err := env.Client.Create(f.ctx(), keep); err != nil {
				t.Fatal(err)
			}
			cm := f.lockCM()
			other := metav1.OwnerReference{APIVersion: "v1", Kind: "ConfigMap", Name: "keep-me", UID: keep.UID}
			// The stale reference is in an API version no longer served (a
			// backup taken under CAPI v0.3): the garbage collector cannot
			// resolve it and leaves it alone, so it cannot race Lock and
			// the counts are Lock's own.
			cm.OwnerReferences = []metav1.OwnerReference{other, {APIVersion: "cluster.x-k8s.io/v1alpha3", Kind: "Cluster", Name: "c1", UID: "0ld0ld00-0000-0000-0000-000000000000"}}
			if err := env.Client.Update(f.ctx(), cm); err != nil {
				t.Fatal(err)
			}
			return m
		},
		want: want{acquired: true, holder: "m1", action: initlock.ActionAdopt, reads: 3, writes: 1},
		check: func(t *testing.T, f *fixture) {
			refs := f.lockCM().OwnerReferences
			if len(refs) != 2 || refs[0].Name != "keep-me" || refs[1] != f.clusterRef() {
				t.Errorf("lock ownerReferences = %+v, want keep-me and the cluster", refs)
			}
		},
	}, {
		name: "the caller's own upstream lock is taken under the register",
		setup: func(f *fixture) *unstructured.Unstructured {
			m := f.machine("m1")
			f.upstreamLock("m1", f.clusterRef())
			return m
		},
		// CREATE lock (AlreadyExists) ∥ PATCH register ∥ GET caller; GET
		// lock ∥ GET Cluster ∥ GET caller; PATCH register ∥ PATCH lock,
		// with a new token in both.
		want:  want{acquired: true, holder: "m1", action: initlock.ActionTakeOver, reads: 4, writes: 4},
		check: func(t *testing.T, f *fixture) { f.expectHeld(t, "m1") },
	}, {
		name: "held by another machine that exists: refused, nothing written",
		setup: func(f *fixture) *unstructured.Unstructured {
			f.mustLock(f.machine("m1"))
			return f.machine("m2")
		},
		// The caller's view shows the register taken: GET lock ∥ GET
		// Cluster ∥ GET caller; GET holder.
		want:  want{acquired: false, holder: "m1", action: initlock.ActionNone, reads: 4, writes: 0},
		check: func(t *testing.T, f *fixture) { f.expectHeld(t, "m1") },
	}, {
		name: "held by an upstream lock of a machine that exists: refused, the claim withdrawn",
		setup: func(f *fixture) *unstructured.Unstructured {
			f.machine("m1")
			f.upstreamLock("m1", f.clusterRef())
			return f.machine("m2")
		},
		// CREATE lock (AlreadyExists) ∥ PATCH register ∥ GET caller; GET
		// lock ∥ GET Cluster ∥ GET caller; GET holder; PATCH register
		// (withdrawn: the create failed, so no lock with the claim's
		// token can land later).
		want:  want{acquired: false, holder: "m1", action: initlock.ActionNone, reads: 5, writes: 3},
		check: func(t *testing.T, f *fixture) { f.expectGrant(t, "") },
	}, {
		name: "held by a machine that no longer exists: taken over in place",
		setup: func(f *fixture) *unstructured.Unstructured {
			f.upstreamLock("gone", f.clusterRef())
			return f.machine("m2")
		},
		// CREATE lock (AlreadyExists) ∥ PATCH register ∥ GET caller; GET
		// lock ∥ GET Cluster ∥ GET caller; GET holder (404); PATCH
		// register ∥ PATCH lock.
		want:  want{acquired: true, holder: "m2", action: initlock.ActionTakeOver, reads: 5, writes: 4},
		check: func(t *testing.T, f *fixture) { f.expectHeld(t, "m2") },
	}, {
		name: "the granted machine is gone: the register is claimed over it",
		setup: func(f *fixture) *unstructured.Unstructured {
			gone := f.machine("gone")
			f.mustLock(gone)
			kubeenv.DeleteAndWait(f.t, env.Client, gone)
			f.cluster = f.get(f.cluster)
			return f.machine("m2")
		},
		// GET lock ∥ GET Cluster ∥ GET caller; GET holder (404); PATCH
		// register (compare-and-swap over the stale grant) ∥ PATCH lock.
		want:  want{acquired: true, holder: "m2", action: initlock.ActionTakeOver, reads: 4, writes: 2},
		check: func(t *testing.T, f *fixture) { f.expectHeld(t, "m2") },
	}, {
		name: "damaged grant register: refused, nothing written",
		setup: func(f *fixture) *unstructured.Unstructured {
			f.cluster = f.update(func(c *unstructured.Unstructured) {
				c.SetAnnotations(map[string]string{initlock.GrantAnnotation: "{oops"})
			})
			return f.machine("m1")
		},
		// GET lock ∥ GET Cluster ∥ GET caller.
		want: want{err: initlock.ErrCorruptLock, reads: 3},
	}, {
		name: "foreign configmap without the label is refused and untouched",
		setup: func(f *fixture) *unstructured.Unstructured {
			f.foreign(map[string]string{"lock-information": `{"machineName":"x"}`}, nil)
			return f.machine("m1")
		},
		// CREATE lock (AlreadyExists) ∥ PATCH register ∥ GET caller; GET
		// lock ∥ GET Cluster ∥ GET caller; PATCH register (withdrawn).
		want: want{err: initlock.ErrNotALock, reads: 4, writes: 3},
	}, {
		name: "foreign configmap without the data key is refused and untouched",
		setup: func(f *fixture) *unstructured.Unstructured {
			f.foreign(map[string]string{"user-data": "precious"}, map[string]string{capi.ClusterNameLabel: "c1"})
			return f.machine("m1")
		},
		want: want{err: initlock.ErrNotALock, reads: 4, writes: 3},
	}, {
		name: "configmap labelled for another cluster is refused",
		setup: func(f *fixture) *unstructured.Unstructured {
			f.foreign(map[string]string{"lock-information": `{"machineName":"x"}`}, map[string]string{capi.ClusterNameLabel: "c2"})
			return f.machine("m1")
		},
		want: want{err: initlock.ErrNotALock, reads: 4, writes: 3},
	}, {
		name: "corrupt lock is not taken over",
		setup: func(f *fixture) *unstructured.Unstructured {
			f.foreign(map[string]string{"lock-information": `{"machineName":`}, map[string]string{capi.ClusterNameLabel: "c1"})
			return f.machine("m1")
		},
		want: want{err: initlock.ErrCorruptLock, reads: 4, writes: 3},
	}, {
		name: "lock naming no machine is corrupt",
		setup: func(f *fixture) *unstructured.Unstructured {
			f.foreign(map[string]string{"lock-information": `{"machineName":""}`}, map[string]string{capi.ClusterNameLabel: "c1"})
			return f.machine("m1")
		},
		want: want{err: initlock.ErrCorruptLock, reads: 4, writes: 3},
	}, {
		name: "paused cluster: no request at all",
		setup: func(f *fixture) *unstructured.Unstructured {
			f.cluster = f.update(func(u *unstructured.Unstructured) { _ = unstructured.SetNestedField(u.Object, true, "spec", "paused") })
			return f.machine("m1")
		},
		want: want{err: initlock.ErrClusterPaused},
	}, {
		name: "cluster paused by annotation: no request at all",
		setup: func(f *fixture) *unstructured.Unstructured {
			f.cluster = f.update(func(u *unstructured.Unstructured) { u.SetAnnotations(map[string]string{capi.PausedAnnotation: ""}) })
			return f.machine("m1")
		},
		want: want{err: initlock.ErrClusterPaused},
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newFixture(t)
			m := tt.setup(f)
			before := ""
			if cm := f.tryLockCM(); cm != nil {
				before = cm.ResourceVersion
			}
			f.counter.Reset()
			res, err := f.locker.Lock(t.Context(), f.cluster, m)
			w := tt.want
			if w.err != nil {
				if !errors.Is(err, w.err) {
					t.Fatalf("Lock() error = %v, want %v", err, w.err)
				}
				if cm := f.tryLockCM(); cm != nil && cm.ResourceVersion != before {
					t.Errorf("Lock() changed the configmap it refused")
				}
			} else if err != nil {
				t.Fatalf("Lock() error = %v", err)
			}
			if res.Acquired != w.acquired || res.Holder != w.holder || (w.err == nil && res.Action != w.action) {
				t.Errorf("Lock() = %+v, want acquired=%v holder=%s action=%s", res, w.acquired, w.holder, w.action)
			}
			if r, wr := f.counter.Reads(), f.counter.Writes(); r != w.reads || wr != w.writes {
				t.Errorf("Lock() made %d reads and %d writes, want %d and %d", r, wr, w.reads, w.writes)
			}
			if g := f.grant(); !res.Acquired && g.Held() && g.MachineName == m.GetName() {
				t.Errorf("refused caller %s left its grant in the register", m.GetName())
			}
			if tt.check != nil {
				tt.check(t, f)
			}
		})
	}
}

// TestLockKeepsTheCallerObjectConsistent: after Lock and Unlock, the
// caller's Cluster object carries the register and the resourceVersion the
// API server returned, so that the caller's next update of it succeeds; a
// stale object is left untouched.
func TestLockKeepsTheCallerObjectConsistent(t *testing.T) {
	f := newFixture(t)
	m := f.machine("m1")
	f.mustLock(m)
	if g := initlock.GrantFrom(f.cluster.GetAnnotations()); !g.Held() || g.MachineName != "m1" {
		t.Fatalf("caller's object register = %s, want the grant to m1", g.Raw())
	}
	labels := map[string]string{"user": "edit"}
	f.cluster.SetLabels(labels)
	if err := env.Client.Update(t.Context(), f.cluster); err != nil {
		t.Fatalf("Update of the caller's object after Lock: %v", err)
	}
	if err := f.locker.Unlock(t.Context(), f.cluster, m); err != nil {
		t.Fatal(err)
	}
	if g := initlock.GrantFrom(f.cluster.GetAnnotations()); g.Held() {
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
	t.Run("holder releases: grant retired, then withdrawn and lock deleted", func(t *testing.T) {
		f := newFixture(t)
		m := f.machine("m1")
		f.mustLock(m)
		f.counter.Reset()
		if err := f.locker.Unlock(t.Context(), f.cluster, m); err != nil {
			t.Fatal(err)
		}
		// GET lock ∥ GET Cluster; PATCH register (retired); PATCH register
		// (withdrawn) ∥ DELETE lock, decided on what the retirement
		// answered.
		if r, w := f.counter.Reads(), f.counter.Writes(); r != 2 || w != 3 {
			t.Errorf("Unlock made %d reads and %d writes, want 2 and 3", r, w)
		}
		if cm := f.tryLockCM(); cm != nil {
			t.Error("lock still exists")
		}
		f.expectGrant(t, "")
		if g := initlock.GrantFrom(f.cluster.GetAnnotations()); g.Held() {
			t.Error("the caller's cluster object still shows the grant")
		}
		if res := f.mustLock(f.machine("m2")); !res.Acquired {
			t.Errorf("Lock(m2) after the release: %+v, want acquired", res)
		}
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
		if f.tryLockCM() != nil {
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
		if cm := f.tryLockCM(); cm == nil || cm.Data["user-data"] != "precious" {
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
		if f.tryLockCM() != nil {
			t.Error("corrupt lock still exists")
		}
	})
	t.Run("IfUnchanged refuses a lock that changed since it was inspected", func(t *testing.T) {
		f := newFixture(t)
		m := f.machine("m1")
		f.mustLock(m)
		seen := f.lockCM()
		cm := seen.DeepCopy()
		cm.Annotations = map[string]string{"touched": "yes"}
		if err := env.Client.Update(t.Context(), cm); err != nil {
			t.Fatal(err)
		}
		err := f.locker.Unlock(t.Context(), f.cluster, m, initlock.IfUnchanged(seen.UID, seen.ResourceVersion))
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
