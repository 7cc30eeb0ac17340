package library_test

import (
	"context"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"

	"github.com/initlock/initlock/internal/kubeenv"
)

// TestRegressionLateWithdrawal: the holder's Unlock timed out on the
// client while its withdrawal of the grant, or its delete of the lock, was
// still on its way; the server applies it later. An earlier Lock, the
// holder's next call, confirmed its grant live without writing, and the
// late withdrawal then emptied that grant: a second Machine found an empty
// register and took over.
//
// What makes it safe now: Unlock first retires the grant (a new token for
// the same Machine) and withdraws only that retired value, with a
// compare-and-swap, and deletes the lock only once the withdrawal is
// written. A Lock relies on a grant without writing only when the register
// and the lock carry the same token, which a retired grant never does, so
// the holder's next Lock claims the register again with a fresh token; the
// late withdrawal's test of the retired value then fails (422), and a late
// delete's resourceVersion precondition fails (409) once the lock is
// written again.
func TestRegressionLateWithdrawal(t *testing.T) {
	for _, tc := range []struct {
		name string
		// held tells which write of the Unlock is held back.
		held func(w write) bool
		// unlockWrites are the Unlock's writes that reach the server;
		// lockReads and lockWrites the holder's next Lock's requests.
		unlockWrites, lockReads, lockWrites int
		// late is the answer the held write must get once sent.
		late func(error) bool
	}{{
		// GET lock ∥ GET Cluster; GET m1; PATCH retire; PATCH withdraw,
		// held back. The next Lock: GET lock ∥ GET Cluster ∥ GET m1; PATCH
		// claim ∥ GET m1; PATCH lock.
		name: "withdrawal", held: write.withdrawal, unlockWrites: 1, lockReads: 4, lockWrites: 2, late: apierrors.IsInvalid,
	}, {
		// GET lock ∥ GET Cluster; GET m1; PATCH retire; PATCH withdraw;
		// PATCH the release mark; DELETE, held back. The next Lock (free path): PATCH claim ∥ GET
		// m1; CREATE (409); GET lock ∥ GET Cluster ∥ GET m1; PATCH lock
		// with the claim's token.
		name: "delete", held: verb("delete"), unlockWrites: 3, lockReads: 4, lockWrites: 3, late: apierrors.IsConflict,
	}} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t)
			m1, m2 := f.machine("m1"), f.machine("m2")
			f.mustLock(m1)
			first, _, _ := f.lockRecord(t)

			ctx, cancel := context.WithCancel(t.Context())
			defer cancel()
			fl := f.withFaults(t, func(w write) (outcome, error) {
				if tc.held(w) {
					// The caller's deadline passes while the request is on its way.
					cancel()
					return hold, timedOut
				}
				return pass, nil
			})
			f.counter.Reset()
			if err := f.locker.Unlock(ctx, f.cluster, m1); err == nil {
				t.Fatal("Unlock(m1) succeeded, want the timeout")
			}
			f.counts(t, "Unlock(m1)", 3, tc.unlockWrites)
			if len(fl.held) != 1 {
				t.Fatalf("attack not exercised: %d writes held back, want the %s", len(fl.held), tc.name)
			}
			if g := f.grant(); g.Token == first.Token {
				t.Fatalf("register = %s, want m1's grant retired under a new token, or withdrawn", g.Raw())
			}

			// The holder's next Lock: its Cluster object shows what the
			// Unlock wrote.
			f.counter.Reset()
			res, err := f.locker.Lock(t.Context(), f.cluster, m1)
			expectAcquired(t, "m1", res, err)
			f.counts(t, "Lock(m1) after the timed-out Unlock", tc.lockReads, tc.lockWrites)
			f.expectHeld(t, "m1")

			// Now the server applies the held write.
			for _, err := range fl.late(t.Context()) {
				if !tc.late(err) {
					t.Errorf("late %s: %v, want its precondition to fail", tc.name, err)
				}
			}
			f.expectHeld(t, "m1")

			f.counter.Reset()
			f.lockLive(t, m2, "m1")
			f.counts(t, "Lock(m2)", 4, 0)
			f.expectHeld(t, "m1")
		})
	}
}

// TestRegressionLateClaimLeavesNoPhantomGrant: a Lock whose claim timed
// out on the client is refused (an upstream lock names another existing
// Machine). Its claim was not yet applied when it read the register, so
// it had nothing to withdraw; the server applies the claim afterwards. A
// grant nobody was told about then names the refused caller, and once the
// upstream holder is gone every other Machine is refused on its behalf,
// for as long as it exists, without an error.
//
// What makes it safe now: a refused call whose claim's answer was lost,
// and that does not see the claim in the register, fences the register
// with a release written against the value it read; the late claim's test
// then fails (422), and another Machine is granted the lock once the
// upstream holder is gone.
func TestRegressionLateClaimLeavesNoPhantomGrant(t *testing.T) {
	f := newFixture(t)
	m1, m2, m3 := f.machine("m1"), f.machine("m2"), f.machine("m3")
	f.upstreamLock("m2", f.clusterRef())
	held := false
	fl := f.withFaults(t, func(w write) (outcome, error) {
		if w.claimBy("m1") && !held {
			held = true
			return hold, timedOut
		}
		return pass, nil
	})
	refused, lockErr := f.locker.Lock(t.Context(), f.cluster, m1)
	if refused.Acquired || refused.Holder != "m2" {
		t.Fatalf("Lock(m1) = %+v, want refused: m2 holds the upstream lock", refused)
	}
	late := fl.late(t.Context())
	if len(late) != 1 {
		t.Fatalf("%d claims held back, want 1", len(late))
	}
	phantom := late[0] == nil
	if g := f.grant(); phantom && g.MachineName != "m1" {
		t.Fatalf("late claim applied, yet the register = %s", g.Raw())
	}
	// The refused call fenced the register (a release written against the
	// empty value it read), so the late claim's test fails.
	if !apierrors.IsInvalid(late[0]) {
		t.Errorf("late claim answered %v, want 422: the refused call fences the register against it", late[0])
	}

	// The upstream holder goes away (its init failed, say).
	kubeenv.DeleteAndWait(t, env.Client, m2)
	res, err := f.locker.Lock(t.Context(), f.get(f.cluster), m3)
	if err != nil {
		t.Fatalf("Lock(m3): %v", err)
	}
	if !res.Acquired && phantom && lockErr == nil {
		t.Errorf("the late claim of m1 was applied (no error) and left the grant %s, which refuses m3 (%+v); "+
			"Lock(m1) had returned %+v without an error, so nothing releases that grant while m1 exists", f.grant().Raw(), res, refused)
	}
	if res.Acquired {
		f.expectHeld(t, "m3")
		f.lockLive(t, m1, "m3")
	} else if g := f.grant(); g.MachineName == "m1" {
		// The phantom grant does hold the lock for m1: only m1 may get it.
		f.lockLive(t, m1, "m1")
		f.expectHeld(t, "m1")
	}
}
