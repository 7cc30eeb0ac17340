package library_test

import (
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/initlock/initlock/internal/kubeenv/wire"
)

// TestRegressionLostRegister: the grant register is lost while the lock
// ConfigMap survives: the annotation is edited away, the Cluster is
// written back by a PUT without it, or the Cluster comes back from a
// backup older than the grant while the lock comes from a newer one. An
// earlier Lock let the register alone decide: with it empty, a second
// Machine claimed it and took over the lock of the holder, which exists
// and may be running init.
//
// What makes it safe now (defence in depth): the lock is free only when
// neither the ConfigMap nor the register names an existing Machine other
// than the caller. A lock written by initlock that names an existing
// Machine refuses every other caller, whose claim is withdrawn; the holder
// claims the register again on its next Lock.
func TestRegressionLostRegister(t *testing.T) {
	for _, tc := range []struct {
		name string
		// lose removes the register and returns the holder as it now is.
		lose func(t *testing.T, f *fixture, m1 *unstructured.Unstructured, older []*unstructured.Unstructured) *unstructured.Unstructured
	}{{
		name: "annotation edited away",
		lose: func(t *testing.T, f *fixture, m1 *unstructured.Unstructured, _ []*unstructured.Unstructured) *unstructured.Unstructured {
			patch := []byte(`{"metadata":{"annotations":{"` + wire.GrantAnnotation + `":null}}}`)
			if err := env.Client.Patch(t.Context(), f.get(f.cluster), client.RawPatch(types.MergePatchType, patch)); err != nil {
				t.Fatal(err)
			}
			return m1
		},
	}, {
		name: "PUT of the Cluster without it",
		lose: func(t *testing.T, f *fixture, m1 *unstructured.Unstructured, _ []*unstructured.Unstructured) *unstructured.Unstructured {
			f.update(func(u *unstructured.Unstructured) {
				a := u.GetAnnotations()
				delete(a, wire.GrantAnnotation)
				u.SetAnnotations(a)
			})
			return m1
		},
	}, {
		name: "Cluster restored from a backup older than the grant",
		lose: func(t *testing.T, f *fixture, _ *unstructured.Unstructured, older []*unstructured.Unstructured) *unstructured.Unstructured {
			newer := f.backup()
			f.deleteAll(newer)
			var objs []*unstructured.Unstructured
			for _, o := range newer {
				if o.GetKind() != "Cluster" {
					objs = append(objs, o)
				}
			}
			for _, o := range older {
				if o.GetKind() == "Cluster" {
					objs = append(objs, o)
				}
			}
			restored := f.restore(objs)
			f.cluster = restored["Cluster/c1"]
			return restored["Machine/m1"]
		},
	}} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t)
			m1 := f.machine("m1")
			f.machine("m2")
			older := f.backup()
			f.mustLock(m1)
			cached := snapshot(f.cluster)
			m1 = tc.lose(t, f, m1, older)
			if g := f.grant(); g != nil {
				t.Fatalf("register = %s, want it lost", g.Raw())
			}
			m2 := f.get(&unstructured.Unstructured{Object: map[string]any{
				"apiVersion": m1.GetAPIVersion(), "kind": "Machine",
				"metadata": map[string]any{"namespace": f.ns, "name": "m2"}}})
			rv := f.lockCM().ResourceVersion
			if f.lockHolder() != "m1" {
				t.Fatalf("lock held by %s, want m1", f.lockHolder())
			}

			f.counter.Reset()
			f.lockLive(t, m2, "m1")
			// PATCH claim ∥ GET m2; CREATE (409); GET lock ∥ GET Cluster ∥
			// GET m2; GET m1; PATCH register (withdrawn). It answers at once:
			// it never waits for another caller.
			f.counts(t, "Lock(m2)", 5, 3)
			if got := f.lockCM().ResourceVersion; got != rv {
				t.Errorf("Lock(m2) wrote the lock of m1")
			}
			f.expectGrant(t, "")

			// The holder's next Lock, with the Cluster its cache showed before
			// the loss (or, after the restore, the restored one), records its
			// grant again.
			view := cached
			if cached.GetUID() != f.cluster.GetUID() {
				view = f.get(f.cluster)
			}
			res, err := f.locker.Lock(t.Context(), view, m1)
			expectAcquired(t, "m1", res, err)
			f.counter.Reset()
			f.lockLive(t, m2, "m1")
			f.counts(t, "Lock(m2) once the register is back", 4, 0)
			f.expectHeld(t, "m1")
		})
	}
}
