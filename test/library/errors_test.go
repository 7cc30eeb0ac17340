package library_test

import (
	"errors"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"

	"github.com/initlock/initlock/pkg/initlock"
)

// TestRepeatedErrorsSayWhatHappened: a Lock or Unlock whose every round
// fails gives up after 8 rounds. Only when the rounds lost races is that
// contention (ErrContended, wrapping the last race lost); any other error
// comes back as itself, wrapped.
func TestRepeatedErrorsSayWhatHappened(t *testing.T) {
	alreadyExists := apierrors.NewAlreadyExists(corev1.Resource("configmaps"), "c1-lock")
	conflict := apierrors.NewConflict(corev1.Resource("configmaps"), "c1-lock", errors.New("the object has been modified"))
	for _, tc := range []struct {
		name string
		// call makes the Lock or Unlock with faults.
		call func(t *testing.T, f *fixture) error
		// is tells the error apart; contended whether it is ErrContended.
		is        func(error) bool
		contended bool
		// reads and writes of the call that reached the API server.
		reads, writes int
	}{{
		name: "Lock: every create of the lock answered 503",
		call: lockWithEveryCreateAnswered(unavailable),
		is:   apierrors.IsServiceUnavailable,
		// PATCH claim ∥ GET m1; CREATE (503); then 8 rounds of GET lock ∥
		// GET Cluster ∥ GET m1; CREATE (503). The refused creates never
		// reach the server.
		reads: 25, writes: 1,
	}, {
		name:      "Lock: every create of the lock answered AlreadyExists",
		call:      lockWithEveryCreateAnswered(alreadyExists),
		is:        apierrors.IsAlreadyExists,
		contended: true,
		// As above, every create answered AlreadyExists.
		reads: 25, writes: 1,
	}, {
		name: "Unlock: every delete of the lock answered Conflict",
		call: func(t *testing.T, f *fixture) error {
			m := f.machine("m1")
			f.mustLock(m)
			f.failWhen(t, verb("delete"), refuse, conflict)
			f.counter.Reset()
			return f.locker.Unlock(t.Context(), f.cluster, m)
		},
		is:        apierrors.IsConflict,
		contended: true,
		// GET lock ∥ GET Cluster; GET m1; PATCH retire; PATCH withdraw;
		// PATCH the release mark; DELETE (409); then five rounds of GET
		// lock ∥ GET Cluster; GET m1; DELETE (409), the lock marked
		// already.
		reads: 18, writes: 3,
	}} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t)
			err := tc.call(t, f)
			if !tc.is(err) || errors.Is(err, initlock.ErrContended) != tc.contended {
				t.Fatalf("error = %v; want the last error of the rounds, contended=%v", err, tc.contended)
			}
			var e *initlock.Error
			if !errors.As(err, &e) || e.Name != "c1-lock" {
				t.Errorf("error = %v; want an *initlock.Error naming the lock", err)
			}
			f.counts(t, tc.name, tc.reads, tc.writes)
		})
	}
}

// lockWithEveryCreateAnswered makes m1's Lock with every create of the
// lock refused with err, unsent.
func lockWithEveryCreateAnswered(err error) func(t *testing.T, f *fixture) error {
	return func(t *testing.T, f *fixture) error {
		m := f.machine("m1")
		f.failWhen(t, verb("create"), refuse, err)
		_, lockErr := f.locker.Lock(t.Context(), f.cluster, m)
		return lockErr
	}
}
