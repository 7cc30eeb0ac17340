package library_test

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/initlock/initlock/internal/kubeenv"
	"github.com/initlock/initlock/internal/kubeenv/wire"
	"github.com/initlock/initlock/pkg/initlock"
	"github.com/initlock/initlock/pkg/initlock/capi"
)

// lockWant is what a Lock case must come to.
type lockWant struct {
	acquired bool
	holder   string
	action   string
	err      error
	reads    int
	writes   int
}

// lockCase is one path of Lock: the state it starts from, and what Lock
// must answer, request and leave. The same cases run through
// initlock.Locker (TestLock) and through the drop-in mutex (TestMutexLock).
type lockCase struct {
	name string
	// setup prepares the namespace and returns the machine to lock for.
	setup func(f *fixture) *unstructured.Unstructured
	want  lockWant
	check func(t *testing.T, f *fixture)
}

// lockCases are every path of Lock, with the exact number of reads (GET)
// and writes (create, patch, delete, a failed one included) each makes.
// "∥" are requests made in parallel.
var lockCases = []lockCase{{
	name:  "free: the register claimed, then the lock created",
	setup: func(f *fixture) *unstructured.Unstructured { return f.machine("m1") },
	// PATCH register ∥ GET caller; CREATE lock.
	want: lockWant{acquired: true, holder: "m1", action: "create", reads: 1, writes: 2},
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
	want: lockWant{acquired: true, holder: "m1", action: "none", reads: 3, writes: 0},
}, {
	name: "re-lock after the owner reference was stripped: re-adopted in one write",
	setup: func(f *fixture) *unstructured.Unstructured {
		m := f.machine("m1")
		f.mustLock(m)
		cm := f.lockCM()
		cm.OwnerReferences = nil
		if err := f.admin.Update(f.ctx(), cm); err != nil {
			f.t.Fatal(err)
		}
		return m
	},
	// GET lock ∥ GET Cluster ∥ GET caller, PATCH lock.
	want: lockWant{acquired: true, holder: "m1", action: "adopt", reads: 3, writes: 1},
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
		if err := f.admin.Create(f.ctx(), keep); err != nil {
			f.t.Fatal(err)
		}
		cm := f.lockCM()
		other := metav1.OwnerReference{APIVersion: "v1", Kind: "ConfigMap", Name: "keep-me", UID: keep.UID}
		// The stale reference is in an API version no longer served (a
		// backup taken under CAPI v0.3): the garbage collector cannot
		// resolve it and leaves it alone, so it cannot race Lock and
		// the counts are Lock's own.
		cm.OwnerReferences = []metav1.OwnerReference{other, {APIVersion: "cluster.x-k8s.io/v1alpha3", Kind: "Cluster", Name: "c1", UID: "0ld0ld00-0000-0000-0000-000000000000"}}
		if err := f.admin.Update(f.ctx(), cm); err != nil {
			f.t.Fatal(err)
		}
		return m
	},
	want: lockWant{acquired: true, holder: "m1", action: "adopt", reads: 3, writes: 1},
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
	// PATCH register ∥ GET caller; CREATE lock (AlreadyExists); GET
	// lock ∥ GET Cluster ∥ GET caller; PATCH lock with the claim's
	// token, which the register shows.
	want:  lockWant{acquired: true, holder: "m1", action: "take-over", reads: 4, writes: 3},
	check: func(t *testing.T, f *fixture) { f.expectHeld(t, "m1") },
}, {
	name: "held by another machine that exists: refused, nothing written",
	setup: func(f *fixture) *unstructured.Unstructured {
		f.mustLock(f.machine("m1"))
		return f.machine("m2")
	},
	// The caller's view shows the register taken: GET lock ∥ GET
	// Cluster ∥ GET caller; GET holder.
	want:  lockWant{acquired: false, holder: "m1", action: "none", reads: 4, writes: 0},
	check: func(t *testing.T, f *fixture) { f.expectHeld(t, "m1") },
}, {
	name: "the claim made on a Cluster read before another machine's grant fails its test: refused at once",
	setup: func(f *fixture) *unstructured.Unstructured {
		before := f.get(f.cluster)
		f.mustLock(f.machine("m1"))
		f.cluster = before
		return f.machine("m2")
	},
	// PATCH register (422: its test of the empty register fails) ∥ GET
	// caller. The winner is not read: the caller is refused without
	// learning its name, as upstream refuses the loser of the create.
	want:  lockWant{acquired: false, holder: "", action: "", reads: 1, writes: 1},
	check: func(t *testing.T, f *fixture) { f.expectHeld(t, "m1") },
}, {
	name: "held by an upstream lock of a machine that exists: refused, the claim withdrawn",
	setup: func(f *fixture) *unstructured.Unstructured {
		f.machine("m1")
		f.upstreamLock("m1", f.clusterRef())
		return f.machine("m2")
	},
	// PATCH register ∥ GET caller; CREATE lock (AlreadyExists); GET
	// lock ∥ GET Cluster ∥ GET caller; GET holder; PATCH register
	// (withdrawn: the create failed, so no lock with the claim's
	// token can land later).
	want:  lockWant{acquired: false, holder: "m1", action: "none", reads: 5, writes: 3},
	check: func(t *testing.T, f *fixture) { f.expectGrant(t, "") },
}, {
	name: "held by a machine that no longer exists: taken over in place",
	setup: func(f *fixture) *unstructured.Unstructured {
		f.upstreamLock("gone", f.clusterRef())
		return f.machine("m2")
	},
	// PATCH register ∥ GET caller; CREATE lock (AlreadyExists); GET
	// lock ∥ GET Cluster ∥ GET caller; GET holder (404); PATCH lock
	// with the claim's token.
	want:  lockWant{acquired: true, holder: "m2", action: "take-over", reads: 5, writes: 3},
	check: func(t *testing.T, f *fixture) { f.expectHeld(t, "m2") },
}, {
	name: "the granted machine is gone: the register is claimed over it",
	setup: func(f *fixture) *unstructured.Unstructured {
		gone := f.machine("gone")
		f.mustLock(gone)
		kubeenv.DeleteAndWait(f.t, f.admin, gone)
		f.cluster = f.get(f.cluster)
		return f.machine("m2")
	},
	// GET lock ∥ GET Cluster ∥ GET caller; GET holder (404); PATCH
	// register (compare-and-swap over the stale grant) ∥ GET caller
	// (after the Cluster: a restore between the first reads shows);
	// PATCH lock.
	want:  lockWant{acquired: true, holder: "m2", action: "take-over", reads: 5, writes: 2},
	check: func(t *testing.T, f *fixture) { f.expectHeld(t, "m2") },
}, {
	name: "damaged grant register: refused, nothing written",
	setup: func(f *fixture) *unstructured.Unstructured {
		f.cluster = f.update(func(c *unstructured.Unstructured) {
			c.SetAnnotations(map[string]string{wire.GrantAnnotation: "{oops"})
		})
		return f.machine("m1")
	},
	// GET lock ∥ GET Cluster ∥ GET caller.
	want: lockWant{err: initlock.ErrCorruptLock, reads: 3},
},
	refusedConfigMap("foreign configmap without the label is refused and untouched", initlock.ErrNotALock,
		map[string]string{"lock-information": `{"machineName":"x"}`}, nil),
	refusedConfigMap("foreign configmap without the data key is refused and untouched", initlock.ErrNotALock,
		map[string]string{"user-data": "precious"}, map[string]string{capi.ClusterNameLabel: "c1"}),
	refusedConfigMap("configmap labelled for another cluster is refused", initlock.ErrNotALock,
		map[string]string{"lock-information": `{"machineName":"x"}`}, map[string]string{capi.ClusterNameLabel: "c2"}),
	refusedConfigMap("corrupt lock is not taken over", initlock.ErrCorruptLock,
		map[string]string{"lock-information": `{"machineName":`}, map[string]string{capi.ClusterNameLabel: "c1"}),
	refusedConfigMap("lock naming no machine is corrupt", initlock.ErrCorruptLock,
		map[string]string{"lock-information": `{"machineName":""}`}, map[string]string{capi.ClusterNameLabel: "c1"}),
	pausedCluster("paused cluster: no request at all", kubeenv.Paused),
	pausedCluster("cluster paused by annotation: no request at all", func(u *unstructured.Unstructured) {
		u.SetAnnotations(map[string]string{capi.PausedAnnotation: ""})
	}),
}

// refusedConfigMap is the case of a ConfigMap with data and labels in the
// lock's place, which Lock refuses with err and leaves untouched: PATCH
// register ∥ GET caller; CREATE lock (AlreadyExists); GET lock ∥ GET
// Cluster ∥ GET caller; PATCH register (withdrawn).
func refusedConfigMap(name string, err error, data, labels map[string]string) lockCase {
	return lockCase{name: name, want: lockWant{err: err, reads: 4, writes: 3}, setup: func(f *fixture) *unstructured.Unstructured {
		f.foreign(data, labels)
		return f.machine("m1")
	}}
}

// pausedCluster is the case of a Cluster paused by pause: Lock makes no
// request at all.
func pausedCluster(name string, pause func(*unstructured.Unstructured)) lockCase {
	return lockCase{name: name, want: lockWant{err: initlock.ErrClusterPaused}, setup: func(f *fixture) *unstructured.Unstructured {
		f.cluster = f.update(pause)
		return f.machine("m1")
	}}
}
