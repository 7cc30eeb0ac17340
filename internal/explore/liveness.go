package explore

import (
	"context"
	"errors"
	"fmt"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/initlock/initlock/internal/kubeenv/apimodel"
	"github.com/initlock/initlock/pkg/initlock"
	"github.com/initlock/initlock/pkg/initlock/initlocktest"
)

// probeRounds is how many times each Machine asks again in the liveness
// probe: a first call may hand the lock back or withdraw a grant that the
// next one then finds gone.
const probeRounds = 3

// liveness checks a state in which every actor is done: when no Machine
// holds a grant and the control plane is not initialised, the Machines
// ask for the lock again, one at a time, every request served at once, no
// fault; one of them must be granted it within probeRounds rounds, unless
// only an operator can resolve the state (a corrupt lock or register, or a
// ConfigMap in the lock's way, as pkg/initlock documents), or the lock is
// being deleted, held back by another controller's finalizer.
func (s *System) liveness(ctx context.Context) {
	sn := s.snapshot()
	if len(s.sc.machines()) == 0 {
		return // no Machine asks for the lock: the relinker's scenarios
	}
	if s.checker.violation != nil || sn.cluster == nil || sn.cluster.Initialized || sn.cluster.Paused || s.checker.anyGrant() {
		return
	}
	if sn.lock != nil && sn.lock.Deleting {
		// Another controller's finalizer holds the lock: it counts as held
		// until that controller lets it go, which no Machine can hasten.
		return
	}
	s.mu.Lock()
	s.auto = true
	s.mu.Unlock()
	var last []string
	conflict := false
	for round := range probeRounds {
		last = last[:0]
		for _, name := range s.sc.machines() {
			clObj, err1 := s.store.Get(clusterKey)
			mObj, err2 := s.store.Get(machineKey(name))
			if err1 != nil || err2 != nil {
				continue
			}
			cl := &unstructured.Unstructured{Object: clObj}
			cl.SetGroupVersionKind(apimodel.ClusterGVK)
			m := &unstructured.Unstructured{Object: mObj}
			m.SetGroupVersionKind(apimodel.MachineGVK)
			actor := fmt.Sprintf("probe/%s", name)
			c := s.client(actor)
			l := initlock.New(c, initlocktest.WithTokens(s.token(actor)), initlock.WithClock(clocktesting.NewFakeClock(start)))
			res, err := l.Lock(ctx, cl, m)
			if res.Acquired {
				return
			}
			last = append(last, fmt.Sprintf("%s (round %d): %s %v", name, round+1, res.Verdict, err))
			if errors.Is(err, initlock.ErrCorruptLock) || errors.Is(err, initlock.ErrNotALock) {
				return // an operator's release is the documented way out
			}
			conflict = res.Verdict == "conflict"
		}
	}
	if conflict && (s.restored || s.reverted) {
		// A restore from a backup taken while one Machine's call and
		// another's were both in flight can bring back a register naming
		// one Machine and a lock naming another; a Machine running init
		// can leave exactly the same records, so both stay protected until
		// one of them is gone or an operator releases the lock, as
		// docs/design.md says. So can a register put back to an earlier
		// grant whose Machine was created again under its name since: a
		// record keeps its place whatever the Machine's UID (a holder
		// restored alone is the holder still). Counted, not a violation.
		s.checker.operatorNeeded = true
		return
	}
	s.checker.violate(InvLiveness, "no Machine is granted the lock, and none holds it: %v", last)
}
