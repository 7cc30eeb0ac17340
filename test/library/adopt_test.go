package library_test

import (
	"slices"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/initlock/initlock/internal/kubeenv"
	"github.com/initlock/initlock/pkg/initlock/capi"
)

// TestMutexAdopt: Adopt re-adopts an existing lock whoever holds it and
// whether the control plane is initialised or not, and writes nothing
// else: it never creates, takes over or releases a lock.
func TestMutexAdopt(t *testing.T) {
	strip := func(f *fixture) {
		cm := f.lockCM()
		cm.OwnerReferences = nil
		if err := f.admin.Update(f.ctx(), cm); err != nil {
			f.t.Fatal(err)
		}
	}
	tests := []struct {
		name  string
		setup func(f *fixture)
		want  bool
		// reads and writes: GET lock ∥ GET Cluster ∥ GET the Machines the
		// lock and the register name; an adoption confirms on the Cluster
		// read live (GET), then patches the lock.
		reads, writes int
		owned         bool   // the lock is owned by the Cluster after the call
		holder        string // the lock's holder after the call, "" for none
		logged        string
	}{{
		name: "restored without its owner, held by a Machine that exists: adopted",
		setup: func(f *fixture) {
			f.mustLock(f.machine("m1"))
			strip(f)
		},
		want: true, reads: 4, writes: 1, owned: true, holder: "m1", logged: "Init lock adopted by its Cluster",
	}, {
		name: "the same, on an initialised Cluster: adopted, not released",
		setup: func(f *fixture) {
			f.mustLock(f.machine("m1"))
			strip(f)
			if err := kubeenv.SetInitialized(f.ctx(), f.admin, f.cluster); err != nil {
				f.t.Fatal(err)
			}
		},
		want: true, reads: 4, writes: 1, owned: true, holder: "m1",
	}, {
		name: "an upstream lock with a stale owner UID, its holder existing: adopted",
		setup: func(f *fixture) {
			f.machine("m1")
			// In an API version no longer served, so that the garbage
			// collector leaves it to Adopt.
			f.upstreamLock("m1", metav1.OwnerReference{APIVersion: capi.Group + "/v1alpha3", Kind: "Cluster", Name: "c1", UID: "0ld0ld00-0000-0000-0000-000000000000"})
		},
		want: true, reads: 4, writes: 1, owned: true, holder: "m1",
	}, {
		name:  "owned already: nothing written",
		setup: func(f *fixture) { f.mustLock(f.machine("m1")) },
		want:  true, reads: 3, writes: 0, owned: true, holder: "m1",
	}, {
		name:  "no lock: none created",
		setup: func(f *fixture) { f.machine("m1") },
		want:  true, reads: 2, writes: 0,
	}, {
		name:  "unowned, its holder gone and no grant: left to the next Lock",
		setup: func(f *fixture) { f.upstreamLock("gone") },
		want:  true, reads: 3, writes: 0, holder: "gone",
	}, {
		name: "the same on an initialised Cluster: adopted",
		setup: func(f *fixture) {
			f.upstreamLock("gone")
			if err := kubeenv.SetInitialized(f.ctx(), f.admin, f.cluster); err != nil {
				f.t.Fatal(err)
			}
		},
		want: true, reads: 4, writes: 1, owned: true, holder: "gone",
	}, {
		name:  "a ConfigMap that is not a lock: untouched",
		setup: func(f *fixture) { f.foreign(map[string]string{"user-data": "precious"}, nil) },
		want:  true, reads: 2, writes: 0, logged: "Leaving the init lock as it is",
	}, {
		name: "paused Cluster: nothing read or written, try again",
		setup: func(f *fixture) {
			f.mustLock(f.machine("m1"))
			strip(f)
			f.cluster = f.update(func(u *unstructured.Unstructured) { _ = unstructured.SetNestedField(u.Object, true, "spec", "paused") })
		},
		want: false, reads: 0, writes: 0, holder: "m1", logged: "Cluster is paused, not adopting the init lock",
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newFixture(t)
			tt.setup(f)
			before := kubeenv.MustGetLock(f.t, env.Client, f.ns, "c1")
			f.checkCall(t, "Adopt", newMutex(f.client).Adopt, callWant{ok: tt.want, reads: tt.reads, writes: tt.writes,
				logged: tt.logged, withError: tt.logged == "Leaving the init lock as it is"})
			cm := kubeenv.MustGetLock(f.t, env.Client, f.ns, "c1")
			if (cm == nil) != (before == nil) {
				t.Fatalf("Adopt() created or deleted the lock: before %v, after %v", before != nil, cm != nil)
			}
			if cm == nil {
				return
			}
			if tt.writes == 0 && cm.ResourceVersion != before.ResourceVersion {
				t.Errorf("Adopt() changed the ConfigMap it was to leave alone")
			}
			owned := slices.Contains(cm.OwnerReferences, f.clusterRef())
			if owned != tt.owned {
				t.Errorf("lock owned by the Cluster = %v, want %v (ownerReferences %+v)", owned, tt.owned, cm.OwnerReferences)
			}
			if tt.holder != "" && f.lockHolder() != tt.holder {
				t.Errorf("lock holder = %q, want %q", f.lockHolder(), tt.holder)
			}
			if tt.writes == 1 && cm.Data[`lock-information`] != before.Data[`lock-information`] {
				t.Errorf("Adopt() changed the lock's record: %q, was %q", cm.Data[`lock-information`], before.Data[`lock-information`])
			}
		})
	}
}
