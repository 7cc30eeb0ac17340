package library_test

import (
	"errors"
	"testing"

	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/initlock/initlock/internal/kubeenv/wire"
	"github.com/initlock/initlock/pkg/initlock"
	"github.com/initlock/initlock/pkg/initlock/capi"
)

// TestRegressionStaleCachedGrantAfterWithdrawnClaim: the caller's Cluster
// comes from an informer that saw its claim, while the claim's answer was
// lost (503 after the server applied it). An earlier Lock treated the lost
// answer as a failure and withdrew the claim, so the register was empty
// while the caller's cache still showed its grant; its next Lock trusted
// that view and a lock naming it, and a second Machine reading live took
// the lock over.
//
// What makes it safe now: a claim whose answer is lost is not withdrawn
// blindly; the call reads the register and the lock live and holds the
// lock only when both name it with the claim's token. A claim is withdrawn
// only when the call is refused, and a later Lock never relies on the
// caller's view: it reads the register live, and a lock naming another
// existing Machine refuses the caller whatever the register says.
func TestRegressionStaleCachedGrantAfterWithdrawnClaim(t *testing.T) {
	t.Run("lock created, claim answered 503: confirmed live, not withdrawn", func(t *testing.T) {
		f := newFixture(t)
		m1, m2 := f.machine("m1"), f.machine("m2")
		fl := f.failWhen(t, claimBy("m1"), appliedThenFail, unavailable)
		f.counter.Reset()
		res, err := f.locker.Lock(t.Context(), f.cluster, m1)
		expectAcquired(t, "m1", res, err)
		if res.Recreated || res.Action != string("create") {
			t.Errorf("Lock(m1) = %+v: want the lock created, not recreated (no lock had existed; the claim's answer was lost)", res)
		}
		// PATCH claim (applied, answered 503) ∥ GET m1; GET lock ∥ GET
		// Cluster ∥ GET m1: the register shows the claim; CREATE the lock
		// with its token.
		f.counts(t, "Lock(m1)", 4, 2)
		if len(fl.applied) != 1 {
			t.Fatalf("%d claims applied behind a lost answer, want 1", len(fl.applied))
		}
		cached := snapshot(fl.applied[0])
		claimed := wire.GrantFrom(cached.GetAnnotations())
		f.expectHeld(t, "m1")
		if g := f.grant(); g.Token != claimed.Token {
			t.Errorf("register = %s, want the claim whose answer was lost (token %s)", g.Raw(), claimed.Token)
		}

		res, err = f.locker.Lock(t.Context(), cached, m1)
		expectAcquired(t, "m1", res, err)
		f.counts(t, "re-Lock(m1) with the cached Cluster", 3, 0)
		f.lockLive(t, m2, "m1")
		f.counts(t, "Lock(m2)", 4, 0)
		f.expectHeld(t, "m1")
	})

	t.Run("claim answered 503, caller refused: withdrawn, the cached grant is not trusted", func(t *testing.T) {
		f := newFixture(t)
		m1, m3 := f.machine("m1"), f.machine("m3")
		f.machine("m2")
		held := f.upstreamLock("m2", f.clusterRef())
		fl := f.failWhen(t, claimBy("m1"), appliedThenFail, unavailable)
		f.counter.Reset()
		res, err := f.locker.Lock(t.Context(), f.cluster, m1)
		expectRefused(t, "m1", res, err, "m2")
		// PATCH claim (applied, 503) ∥ GET m1; GET lock ∥ GET Cluster ∥
		// GET m1; GET m2; PATCH register (withdrawn). No lock write: the
		// claim's answer did not say it was written.
		f.counts(t, "Lock(m1)", 5, 2)
		cached := snapshot(fl.applied[0])
		if g := wire.GrantFrom(cached.GetAnnotations()); !g.Held() || g.MachineName != "m1" {
			t.Fatalf("cached Cluster register = %s, want m1's claim", g.Raw())
		}
		if g := f.grant(); !g.Released() {
			t.Fatalf("live register = %s, want the claim withdrawn", g.Raw())
		}

		// m1's cache still shows its grant: it reads live and is refused.
		res, err = f.locker.Lock(t.Context(), cached, m1)
		expectRefused(t, "m1", res, err, "m2")
		f.counts(t, "re-Lock(m1) with the cached Cluster", 4, 0)
		// A third Machine reading live does not take the lock either.
		f.lockLive(t, m3, "m2")
		f.counts(t, "Lock(m3)", 5, 3)
		if cm := f.lockCM(); cm.ResourceVersion != held.ResourceVersion {
			t.Errorf("the lock of m2 was written: resourceVersion %s, want %s", cm.ResourceVersion, held.ResourceVersion)
		}
		f.expectGrant(t, "")
	})
}

// TestRegressionStaleCachedGrantAfterFailedUnlock: the holder's Unlock
// emptied the register but could not delete the lock (503, or no
// permission to delete ConfigMaps). Its cache still shows its grant. An
// earlier Lock took that view and the lock naming the holder as proof of
// holding it (one read), while a second Machine reading live saw an empty
// register and took over a lock that no grant backed.
//
// What makes it safe now: a lock written by initlock that names an
// existing Machine protects it even with an empty register, so the second
// Machine is refused; and the holder's next Lock reads the register live,
// finds it empty and claims it again (a compare-and-swap against the
// released value) before it is told it holds the lock.
func TestRegressionStaleCachedGrantAfterFailedUnlock(t *testing.T) {
	for _, tc := range []struct {
		name string
		// unlock releases m1's lock with a client that cannot delete it.
		unlock func(t *testing.T, f *fixture, m1 *unstructured.Unstructured) error
		want   func(error) bool
		// reads and writes of the Unlock that reached the API server.
		reads, writes int
	}{{
		name: "delete answered 503",
		unlock: func(t *testing.T, f *fixture, m1 *unstructured.Unstructured) error {
			f.failWhen(t, verb("delete"), refuse, unavailable)
			return f.locker.Unlock(t.Context(), f.cluster, m1)
		},
		// A 503 that repeats is not contention: it comes back as itself.
		want: func(err error) bool {
			return apierrors.IsServiceUnavailable(err) && !errors.Is(err, initlock.ErrContended)
		},
		// GET lock ∥ GET Cluster; GET m1; PATCH retire; PATCH withdraw;
		// PATCH the release mark; DELETE (503); then five rounds of GET
		// lock ∥ GET Cluster; GET m1; DELETE (503), the lock marked
		// already. The deletes answered 503 never reach the server.
		reads: 18, writes: 3,
	}, {
		name: "delete forbidden",
		unlock: func(t *testing.T, f *fixture, m1 *unstructured.Unstructured) error {
			// A user that may do everything Lock and Unlock need but delete
			// ConfigMaps.
			c := f.restrictedClient(t, []rbacv1.PolicyRule{
				{APIGroups: []string{""}, Resources: []string{"configmaps"}, Verbs: []string{"get", "create", "patch", "update"}},
				{APIGroups: []string{capi.Group}, Resources: []string{"clusters", "machines"}, Verbs: []string{"get", "patch"}},
			})
			f.counter.Reset()
			return initlock.New(c).Unlock(t.Context(), f.cluster, m1)
		},
		want: apierrors.IsForbidden,
		// GET lock ∥ GET Cluster; GET m1; PATCH retire; PATCH withdraw;
		// PATCH the release mark; DELETE (403, final).
		reads: 3, writes: 4,
	}} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t)
			m1, m2 := f.machine("m1"), f.machine("m2")
			f.mustLock(m1)
			cached := snapshot(f.cluster)
			before, _, _ := f.lockRecord(t)

			f.counter.Reset()
			if err := tc.unlock(t, f, m1); !tc.want(err) {
				t.Fatalf("Unlock(m1) error = %v, want the delete's failure", err)
			}
			f.counts(t, "Unlock(m1)", tc.reads, tc.writes)
			// The lock keeps m1's record, marked for release: its holder
			// gave it up.
			after, rv2, ok := f.lockRecord(t)
			if !ok || after.Ref != before.Ref || after.Token != before.Token || !wire.LockOf(f.lockCM(), "c1").Releasable {
				t.Fatalf("lock after the failed Unlock = %+v (resourceVersion %s), want m1's record, marked for release", after, rv2)
			}
			if g := f.grant(); !g.Released() {
				t.Fatalf("register after the failed Unlock = %s, want released", g.Raw())
			}
			if g := wire.GrantFrom(cached.GetAnnotations()); g.MachineName != "m1" || g.Token != before.Token {
				t.Fatalf("cached Cluster register = %s, want m1's grant", g.Raw())
			}

			f.locker = initlock.New(f.client)
			f.counter.Reset()
			f.lockLive(t, m2, "m1")
			// PATCH claim ∥ GET m2; CREATE (409); GET lock ∥ GET Cluster ∥
			// GET m2; GET m1; PATCH register (withdrawn).
			f.counts(t, "Lock(m2)", 5, 3)
			if _, rv3, _ := f.lockRecord(t); rv3 != rv2 {
				t.Errorf("Lock(m2) wrote the lock of m1")
			}
			f.expectGrant(t, "")

			res, err := f.locker.Lock(t.Context(), cached, m1)
			expectAcquired(t, "m1", res, err)
			if res.Action != "take-over" {
				t.Errorf("re-Lock(m1) action = %s, want %s: the claim and the lock written again", res.Action, "take-over")
			}
			f.counter.Reset()
			f.lockLive(t, m2, "m1")
			f.counts(t, "Lock(m2) after m1's re-Lock", 4, 0)
			f.expectHeld(t, "m1")
			if g := f.grant(); g.Token == before.Token {
				t.Errorf("register kept the token of the released grant")
			}
		})
	}
}
