package library_test

import (
	"slices"
	"testing"

	corev1 "k8s.io/api/core/v1"

	"github.com/initlock/initlock/internal/kubeenv"
	"github.com/initlock/initlock/pkg/initlock"
)

// TestResultAndEventsReportTheChange: Lock's Result says the change it
// made to the lock, and its event on the Cluster says the same, whether
// the write's answer came back or was lost after the API server applied it
// (the call then finds its write applied, by the write's token, and holds
// the lock without writing again). A claim whose answer was lost is this
// call's own: the lock was free, not lost.
func TestResultAndEventsReportTheChange(t *testing.T) {
	lockWrite := func(v string) func(w write) bool {
		return func(w write) bool {
			_, lock := w.obj.(*corev1.ConfigMap)
			return lock && w.verb == v
		}
	}
	for _, tc := range []struct {
		name string
		// goneHolder starts with an upstream lock naming a Machine that
		// does not exist; lostLock with m1's lock lost while granted.
		goneHolder, lostLock bool
		// lose, when set, picks the write whose answer is lost, applied.
		lose          func(w write) bool
		verdict       string
		action        string
		recreated     bool
		event         string
		reads, writes int
	}{{
		name: "free", verdict: "free", action: "create", event: "LockAcquired",
		// PATCH claim ∥ GET m1; CREATE.
		reads: 1, writes: 2,
	}, {
		name: "free, the create's answer lost", lose: lockWrite("create"),
		verdict: "healthy", action: "create", event: "LockAcquired",
		// PATCH claim ∥ GET m1; CREATE (applied, answered 503); GET lock ∥
		// GET Cluster ∥ GET m1: both name m1 with the create's token.
		reads: 4, writes: 2,
	}, {
		name: "free, the claim's answer lost", lose: claimBy("m1"),
		verdict: "free", action: "create", event: "LockAcquired",
		// PATCH claim (applied, answered 503) ∥ GET m1; GET lock ∥ GET
		// Cluster ∥ GET m1; CREATE with the claim's token.
		reads: 4, writes: 2,
	}, {
		name: "holder gone", goneHolder: true,
		verdict: "stale-holder", action: "take-over", event: "LockTakenOver",
		// PATCH claim ∥ GET m1; CREATE (AlreadyExists); GET lock ∥ GET
		// Cluster ∥ GET m1; GET gone (404); PATCH the lock with the
		// claim's token.
		reads: 5, writes: 3,
	}, {
		name: "holder gone, the take-over's answer lost", goneHolder: true, lose: lockWrite("patch"),
		verdict: "healthy", action: "take-over", event: "LockTakenOver",
		// As above, then GET lock ∥ GET Cluster ∥ GET m1: both name m1
		// with the take-over's token.
		reads: 8, writes: 3,
	}, {
		name: "lock lost while granted", lostLock: true,
		verdict: "lost", action: "create", recreated: true, event: "LockAcquired",
		// GET lock ∥ GET Cluster ∥ GET m1; PATCH claim ∥ GET m1; CREATE.
		reads: 4, writes: 2,
	}, {
		name: "lock lost while granted, the create's answer lost", lostLock: true, lose: lockWrite("create"),
		verdict: "healthy", action: "create", recreated: true, event: "LockAcquired",
		// As above, then GET lock ∥ GET Cluster ∥ GET m1: both name m1
		// with the create's token.
		reads: 7, writes: 2,
	}} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t)
			m1 := f.machine("m1")
			if tc.goneHolder {
				f.upstreamLock("gone", f.clusterRef())
			}
			if tc.lostLock {
				f.mustLock(m1)
				if err := env.Client.Delete(t.Context(), f.lockCM()); err != nil {
					t.Fatal(err)
				}
			}
			var fl *faults
			if tc.lose != nil {
				fl = f.failWhen(t, tc.lose, appliedThenFail, unavailable)
			}
			rec := &kubeenv.Recorder{}
			f.locker = initlock.New(f.client, initlock.WithEventRecorder(rec))
			f.counter.Reset()
			res, err := f.locker.Lock(t.Context(), f.cluster, m1)
			expectAcquired(t, "m1", res, err)
			if res.Verdict != tc.verdict || res.Action != tc.action || res.Recreated != tc.recreated {
				t.Errorf("Lock(m1) = %+v; want verdict %s, action %s, recreated %v", res, tc.verdict, tc.action, tc.recreated)
			}
			if got := rec.Reasons(); !slices.Equal(got, []string{tc.event}) {
				t.Errorf("events = %v, want [%s]", got, tc.event)
			}
			f.counts(t, "Lock(m1)", tc.reads, tc.writes)
			if fl != nil && len(fl.applied) != 1 {
				t.Errorf("%d writes applied behind a lost answer, want 1", len(fl.applied))
			}
			f.expectHeld(t, "m1")
			if got := f.lockHolder(); got != "m1" {
				t.Errorf("lock holder = %s, want m1", got)
			}
		})
	}
}

// TestEventsOfRefusalsAndReleases: a call that changes nothing emits
// nothing; a refused call that gives a lost lock back to its granted
// holder warns with LockRecreated, the Result saying so; the holder's
// Unlock emits LockReleased.
func TestEventsOfRefusalsAndReleases(t *testing.T) {
	f := newFixture(t)
	m1, m2 := f.machine("m1"), f.machine("m2")
	f.mustLock(m1)
	rec := &kubeenv.Recorder{}
	f.locker = initlock.New(f.client, initlock.WithEventRecorder(rec))

	expect := func(what string, want ...string) {
		t.Helper()
		if got := rec.Reasons(); !slices.Equal(got, want) {
			t.Errorf("%s: events = %v, want %v", what, got, want)
		}
	}
	res := f.lockLive(t, m1, "m1")
	if res.Action != string("none") {
		t.Errorf("re-Lock(m1) = %+v, want action none", res)
	}
	expect("re-Lock(m1)")

	f.lockLive(t, m2, "m1")
	expect("Lock(m2) while m1 holds it")

	if err := env.Client.Delete(t.Context(), f.lockCM()); err != nil {
		t.Fatal(err)
	}
	res = f.lockLive(t, m2, "m1")
	if !res.Recreated || res.Action != string("recreate") {
		t.Errorf("Lock(m2) with m1's lock lost = %+v, want the lock recreated for m1", res)
	}
	expect("Lock(m2) with m1's lock lost", "LockRecreated")
	if got := f.lockHolder(); got != "m1" {
		t.Errorf("lock holder = %s, want m1", got)
	}

	if err := f.locker.Unlock(t.Context(), f.get(f.cluster), m1); err != nil {
		t.Fatal(err)
	}
	expect("Unlock(m1)", "LockRecreated", "LockReleased")
	if cm := kubeenv.MustGetLock(t, env.Client, f.ns, "c1"); cm != nil {
		t.Errorf("lock still there after Unlock(m1): %v", cm.Data)
	}
}
