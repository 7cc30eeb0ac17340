package engine

import (
	"context"
	"errors"
	"fmt"

	"github.com/go-logr/logr"
	"k8s.io/klog/v2"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/initlock/initlock/pkg/initlock/internal/report"
)

// Outcome is the outcome of Lock.
type Outcome struct {
	// Acquired tells that the calling Machine holds the lock.
	Acquired bool
	// Holder is the Machine that holds the lock; empty when Lock refused
	// the caller at once, its claim of a free lock having lost the race.
	Holder string
	// Verdict is what Lock found; empty when Lock refused the caller
	// without reading the lock, its claim of a free lock having lost the
	// race.
	Verdict Verdict
	// Action is the change Lock made to the lock ConfigMap (ActionNone for
	// none).
	Action Action
	// Recreated tells that the lock had been lost while granted and Lock
	// created it again, for Holder.
	Recreated bool
}

// Lock tries to acquire cluster's init lock for machine. cluster is a
// Cluster API Cluster and machine a Machine of it, each typed (registered in
// the client's scheme), unstructured or, for machine, metadata-only. Both
// may come from a cache: Lock grants the lock only on what it reads live
// or on writes whose preconditions cover what it relies on (see the
// package documentation). When Lock writes the grant register and the
// cluster object passed was the Cluster as it stood before that write,
// Lock updates its annotations and resourceVersion to what the API server
// returned; otherwise it leaves the object untouched. Concurrent calls must
// not share one cluster object.
//
// A lock held by another existing Machine is not an error: the Outcome says
// who holds it, and when to call again. Lock never waits: a caller whose
// claim of a free lock loses the race is refused at once, with no other
// request than the claim and the read of its Machine, as the upstream lock
// refuses a caller whose create lost; it does not learn the winner's name.
// Errors wrap initlock.ErrClusterPaused, initlock.ErrClusterGone,
// initlock.ErrStaleMachine, initlock.ErrNotALock, initlock.ErrCorruptLock, initlock.ErrInvalidName,
// initlock.ErrContended or an API error.
func (l *Env) Lock(ctx context.Context, cluster, machine client.Object) (Outcome, error) {
	cl, m, lockName, err := l.prepare(cluster, machine)
	if err != nil {
		return Outcome{}, err
	}
	if cl.Paused {
		return Outcome{}, pausedError(cl)
	}
	log := ctrl.LoggerFrom(ctx).WithValues("cluster", klog.KRef(cl.Namespace, cl.Name), "machine", m.Name)
	a := &acquisition{l: l, clusterObj: cluster, cl: cl, m: m, lockName: lockName, log: log}
	return a.lock(ctx)
}

// prepare reads what a Lock is given, the Cluster and the Machine, and the
// lock's name, refusing what no lock can be granted on: an object missing,
// a name no lock can carry, a Machine outside the Cluster's namespace.
func (l *Env) prepare(cluster, machine client.Object) (Cluster, Machine, string, error) {
	if cluster == nil || machine == nil {
		return Cluster{}, Machine{}, "", fmt.Errorf("%w: Lock needs a cluster and a machine", report.ErrInvalidName)
	}
	cl, err := ClusterFrom(cluster, l.Client.Scheme())
	if err != nil {
		return Cluster{}, Machine{}, "", err
	}
	m, err := machineFrom(machine, l.Client.Scheme())
	if err != nil {
		return Cluster{}, Machine{}, "", err
	}
	lockName, err := LockName(cl.Name)
	if err != nil {
		return Cluster{}, Machine{}, "", &report.Error{Namespace: cl.Namespace, Name: truncate(cl.Name), Kind: "cluster", Err: err,
			Detail: "a lock name must be a DNS subdomain of at most 253 characters and the cluster name a label value of at most 63"}
	}
	if m.Name == "" || m.Namespace != cl.Namespace {
		return Cluster{}, Machine{}, "", &report.Error{Namespace: cl.Namespace, Name: m.Name, Kind: "machine", Err: report.ErrInvalidName,
			Detail: fmt.Sprintf("the machine must be named and live in the cluster's namespace (it is in %q)", m.Namespace)}
	}
	return cl, m, lockName, nil
}

// acquisition is one Lock call.
type acquisition struct {
	l          *Env
	clusterObj client.Object
	// cl is the Cluster as passed, then as last read live.
	cl       Cluster
	m        Machine
	lockName string
	log      logr.Logger
	// tokens are the tokens this call wrote or tried to write; uncertain
	// tells that a write of the lock may have been applied unseen, or may
	// still be applied, and claimUncertain the same of a claim.
	tokens         []string
	uncertain      bool
	claimUncertain bool
	// lostWrites are the lock writes whose answers were lost, by token
	// (Observation.LostWrites).
	lostWrites map[string]Decision
	// read tells that the call has read the lock live; heldBefore that the
	// lock named the caller then, before this call wrote it, as its first
	// decision found (Decision.HeldBefore).
	read       bool
	heldBefore bool
}

// lock takes the free path when the register, as the caller saw it, is
// empty, and reads, decides and writes in rounds (settle) when that did
// not settle the call.
func (a *acquisition) lock(ctx context.Context) (Outcome, error) {
	if !a.cl.Initialized && !a.cl.Grant.Held() && !a.cl.Grant.Damaged() {
		if res, ok, err := a.free(ctx); ok || err != nil {
			return res, err
		}
	}
	return a.settle(ctx)
}

// free is the free path: the register was empty as the caller saw it. The
// caller claims the register with a fresh token and reads its own Machine,
// in parallel, before deciding: the claim's compare-and-swap proves the
// view it was made on (the register empty, the Cluster the one seen and
// not paused). Decide, on that view, the caller's Machine as read live and
// no lock, grants the caller a claim and a create; the create then proves
// that there was no lock, and the lock is acquired when it succeeds.
// Nothing is written to the lock unless the claim was. A live caller whose
// claim failed its test (the register, the pause state or the Cluster's
// UID is not what it saw: another Machine's claim won, as a rule) is
// refused at once, as the upstream lock refuses a caller whose create
// lost: the one refusal not decided by Decide, which needs no proof (the
// next call, on a fresh view, goes through Decide). ok is false when none
// of that settled it: the caller then reads everything live and decides
// (a claim made for a stale object is withdrawn there).
func (a *acquisition) free(ctx context.Context) (Outcome, bool, error) {
	token := a.token()
	live, gerr, merr := a.claimAndConfirm(ctx, a.cl, token)
	switch {
	case gerr == nil && merr == nil:
		d := Decide(a.claimedView(live), Policy{}, a.l.Clock.Now())
		if !d.Acquired || d.Register != RegisterClaim || d.Action != ActionCreate || d.ReadCallerFirst {
			return Outcome{}, false, nil
		}
		_, cerr := createLock(ctx, a.l.Client, a.cl, a.lockName, a.record(a.m, token))
		a.noteLockWrite(cerr, d, token)
		switch {
		case cerr == nil:
			a.acquired(d.Action)
			return Outcome{Acquired: true, Holder: d.Holder, Verdict: d.Verdict, Action: d.Action}, true, nil
		case definite(cerr) && !lostRace(cerr):
			return Outcome{}, false, fmt.Errorf("lock %s/%s: create for machine %s: %w", a.cl.Namespace, a.lockName, a.m.Name, cerr)
		}
	case gerr != nil && definite(gerr) && !lostRace(gerr):
		return Outcome{}, false, a.registerError(gerr)
	case testFailed(gerr) && merr == nil && sameMachine(&a.m, live):
		a.log.V(4).Info("The claim of the free lock lost the race, refused")
		return Outcome{}, true, nil
	}
	return Outcome{}, false, nil
}

// claimedView is what the free path's claim proved, for Decide: the
// Cluster as the caller saw it (the claim's test showed its register
// empty, its UID the same and it unpaused), no lock (the create proves
// it), and the caller's Machine as read live beside the claim.
func (a *acquisition) claimedView(live *Machine) Observation {
	return Observation{Intent: IntentLock, ClusterName: a.cl.Name, APIVersion: a.cl.APIVersion,
		Cluster: &a.cl, Caller: &a.m, CallerLive: live, Tokens: a.tokens}
}

// settle reads everything live, decides, and writes what the decision
// says: the claim of the register first, then the lock. A write that lost
// a race, or failed without telling whether it was applied, starts it
// again. It never waits: a caller that is not granted the lock is told so
// at once.
func (a *acquisition) settle(ctx context.Context) (Outcome, error) {
	var last error // the error of the latest round that failed with one
	for range maxAttempts {
		obs, cm, err := Read(ctx, From(a.l.Reader), Query{Namespace: a.cl.Namespace, ClusterName: a.cl.Name,
			APIVersion: a.cl.APIVersion, Intent: IntentLock, Caller: &a.m})
		if err != nil {
			return Outcome{}, fmt.Errorf("lock %s/%s: %w", a.cl.Namespace, a.lockName, err)
		}
		obs.Tokens, obs.Uncertain, obs.ClaimUncertain, obs.HeldBefore = a.tokens, a.uncertain, a.claimUncertain, a.heldBefore
		obs.LostWrites, obs.FirstRead = a.lostWrites, !a.read
		d := Decide(obs, Policy{}, a.l.Clock.Now())
		a.read, a.heldBefore = true, d.HeldBefore
		if obs.Cluster != nil {
			a.cl = *obs.Cluster
		}
		if d.Err != nil {
			raced, err := a.refuse(ctx, cm, obs, d)
			if raced {
				continue
			}
			return Outcome{Verdict: d.Verdict, Holder: d.Holder}, errors.Join(a.decisionError(obs, d), err)
		}
		if !d.Acquired {
			res, raced, err := a.refused(ctx, cm, obs, d)
			if raced {
				continue
			}
			return res, err
		}
		done, err := a.write(ctx, cm, d)
		if done {
			made := d.Action
			if d.Landed != "" {
				a.acquired(d.Landed)
				made = d.Landed
			}
			if d.Action != ActionNone || d.Landed == "" {
				a.acquired(d.Action)
			}
			return Outcome{Acquired: true, Holder: a.m.Name, Verdict: d.Verdict, Action: made, Recreated: d.Recreated}, nil
		}
		if err != nil && fatal(err) {
			return Outcome{}, err
		}
		if err != nil {
			a.log.V(4).Info("Lock changed under us, retrying", "action", d.Action, "register", d.Register, "reason", err.Error())
			last = err
		}
	}
	return Outcome{}, unsettled(a.cl.Namespace, a.lockName, last)
}
