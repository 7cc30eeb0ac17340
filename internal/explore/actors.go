package explore

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	clocktesting "k8s.io/utils/clock/testing"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/initlock/initlock/internal/controllers/lock"
	"github.com/initlock/initlock/internal/kubeenv/apimodel"
	"github.com/initlock/initlock/internal/kubeenv/faults"
	"github.com/initlock/initlock/pkg/initlock"
	"github.com/initlock/initlock/pkg/initlock/initlocktest"
	"github.com/initlock/initlock/pkg/initlock/keeper"
)

// start is the time of every execution: the code under test reads its
// clock, and nothing waits for time to pass.
var start = time.Date(2026, 12, 2, 12, 0, 0, 0, time.UTC)

// provider is a bootstrap provider's reconciles of one control-plane
// Machine, as CABPK makes them: it reads the Cluster and the Machine from
// its informer cache (any version not older than what it saw last), calls
// Lock and, when granted the lock, runs init. The init either goes on to
// the end of the execution, or fails, after which the provider calls
// Unlock and tries again, or its reconcile ends before the bootstrap data
// is written and the next one calls Lock again; a refusal or an error is
// tried again too, up to the scenario's number of attempts.
func (s *System) provider(ctx context.Context, p Provider) {
	machine, actor := p.Machine, p.actor()
	defer s.actorDone(actor)
	var c client.Client = s.client(actor)
	if s.sc.bug != nil {
		c = s.sc.bug(c)
	}
	l := initlock.New(c, initlocktest.WithTokens(s.token(actor)), initlock.WithClock(&schedClock{
		FakePassiveClock: clocktesting.NewFakePassiveClock(start), sys: s, actor: actor}))
	for i := range p.Attempts {
		if s.isAborted() {
			return
		}
		// Between attempts the provider's future depends on nothing it was
		// told: its Locker keeps nothing from one call to the next.
		s.forget(actor, fmt.Sprintf("attempt %d", i))
		s.wait(actor, "reconcile")
		clObj, mObj := s.view(actor, clusterKey), s.view(actor, machineKey(machine))
		if clObj == nil || mObj == nil || (p.Incarnation != 0 && !strings.HasSuffix(uidOf(mObj), fmt.Sprintf("-%d", p.Incarnation))) {
			continue // nothing of this provider's to reconcile in the cache
		}
		cl := &unstructured.Unstructured{Object: clObj}
		cl.SetGroupVersionKind(apimodel.ClusterGVK)
		m := &unstructured.Unstructured{Object: mObj}
		m.SetGroupVersionKind(apimodel.MachineGVK)
		if p.Adopt {
			_, _ = l.Adopt(ctx, cl)
			if s.isAborted() {
				return
			}
		}
		s.checker.callStarted(s, actor)
		s.touch(hookCallStarted)
		res, err := l.Lock(ctx, cl, m)
		if s.isAborted() {
			return
		}
		s.checker.lockReturned(s, actor, machine, m.GetUID(), res, err)
		if errors.Is(err, initlock.ErrStaleMachine) {
			s.touch(hookStale)
		}
		if !res.Acquired {
			continue
		}
		s.touch(hookGranted)
		ways := []string{}
		if p.Unlock {
			ways = append(ways, wayInitFails)
		}
		if p.Relock {
			ways = append(ways, wayRelock)
		}
		ways = append(ways, wayGoesOn)
		switch ways[s.branch(actor, "init", ways...)] {
		case wayInitFails:
			s.checker.unlocking(machine, m.GetUID())
			s.touch(hookUnlocking)
			if p.AnyHolder {
				_ = l.Unlock(ctx, cl, nil, initlock.AnyHolder())
			} else {
				_ = l.Unlock(ctx, cl, m)
			}
		case wayGoesOn:
			return
		}
	}
}

// wayClasses are the fault classes of the ways a provider's script goes
// (internal/kubeenv/faults).
var wayClasses = map[string]faults.Class{
	wayInitFails: faults.InitFails,
	wayRelock:    faults.Relock,
}

// The ways of a provider's init, once it is granted the lock.
const (
	wayInitFails = "fails, so Unlock"
	wayRelock    = "is not written yet, so Lock again"
	wayGoesOn    = "goes on"
)

// staleReadClass is the fault class of a cache read of actor's that shows
// a version older than the live one.
func staleReadClass(actor string) faults.Class {
	if actor == "manager" {
		return faults.ManagerCacheLag
	}
	return faults.StaleCallerView
}

// manager is initlock-manager's lock reconciler, reading through its own
// informer cache (any version not older than what it saw last) and
// confirming against the API server as it does.
func (s *System) manager(ctx context.Context) {
	const actor = "manager"
	defer s.actorDone(actor)
	live := s.client(actor)
	r := reconciler(viewClient{Client: live, sys: s}, live)
	for range s.sc.Reconciles {
		if s.isAborted() {
			return
		}
		s.wait(actor, "reconcile")
		s.checker.reconcileStarted(s)
		s.touch(hookReconcile)
		_, _ = r.Reconcile(ctx, clusterRequest)
		s.checker.reconcileEnded(s)
	}
}

// clusterRequest is the manager's reconcile of the Cluster.
var clusterRequest = ctrl.Request{NamespacedName: types.NamespacedName{Namespace: namespace, Name: clusterName}}

// reconciler is initlock-manager's lock reconciler, reading through cache
// and confirming through live.
func reconciler(cache, live client.Client) *lock.Reconciler {
	return &lock.Reconciler{Client: cache, APIReader: live, CAPIVersion: "v1beta2", Policy: keeper.DefaultPolicy(),
		Clock: clocktesting.NewFakePassiveClock(start)}
}

// operator is kubectl initlock release, without --force unless the
// scenario forces it: it inspects live, and, when the release needs no
// --force (or is forced), releases what it inspected (keeper.Release).
func (s *System) operator(ctx context.Context) {
	const actor = "operator"
	defer s.actorDone(actor)
	c := s.client(actor)
	s.wait(actor, "release")
	st, err := keeper.Inspect(ctx, c, keeper.Query{Namespace: namespace, Cluster: clusterName, CAPIVersion: "v1beta2",
		Release: true, Force: s.sc.OperatorForce, Now: start})
	if err != nil || !st.ClusterExists || st.Err != nil || !st.Writes {
		return
	}
	if st.LockExists && s.sc.OperatorForce {
		s.mu.Lock()
		s.checker.forced = st.LockUID
		s.mu.Unlock()
	}
	_ = keeper.Release(ctx, c, st, initlocktest.WithTokens(s.token(actor)), initlock.WithClock(clocktesting.NewFakePassiveClock(start)))
}

func uidOf(obj map[string]any) string {
	meta, _ := obj["metadata"].(map[string]any)
	uid, _ := meta["uid"].(string)
	return uid
}

func rvOf(obj map[string]any) string {
	meta, _ := obj["metadata"].(map[string]any)
	rv, _ := meta["resourceVersion"].(string)
	return rv
}

// schedClock is a provider's clock: time stands still, and a wait is a
// point where the scheduler lets the provider go on when it chooses.
type schedClock struct {
	*clocktesting.FakePassiveClock
	sys   *System
	actor string
}

func (c *schedClock) Sleep(time.Duration) { c.sys.wait(c.actor, "backs off") }
