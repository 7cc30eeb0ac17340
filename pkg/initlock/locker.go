package initlock

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/initlock/initlock/pkg/initlock/capi"
)

// EventRecorder is the part of k8s.io/client-go/tools/events.EventRecorder
// that a Locker uses to emit events on the Cluster.
type EventRecorder interface {
	Eventf(regarding, related runtime.Object, eventtype, reason, action, note string, args ...any)
}

// Event reasons a Locker emits on the Cluster when given an EventRecorder.
const (
	EventLockAcquired  = "LockAcquired"
	EventLockTakenOver = "LockTakenOver"
	EventLockAdopted   = "LockAdopted"
	EventLockRecreated = "LockRecreated"
	EventLockReleased  = "LockReleased"
)

// maxAttempts bounds the read-decide-write rounds of one call, and
// maxRacingWaits how many of them wait for a racing caller to hand the
// lock over (10, 20, 40 and 80 ms).
const (
	maxAttempts    = 8
	maxRacingWaits = 4
)

// Locker acquires and releases clusters' init locks. It is safe for
// concurrent use.
type Locker struct {
	client   client.Client
	reader   client.Reader
	clock    clock.PassiveClock
	recorder EventRecorder
	tokens   func() string
}

// Option configures a Locker.
type Option func(*Locker)

// WithAPIReader makes the Locker read the lock, the Cluster and the
// Machines through r, which must read the API server directly (a
// manager's GetAPIReader), never a possibly stale cache. Without it the
// client passed to New must itself be uncached.
func WithAPIReader(r client.Reader) Option { return func(l *Locker) { l.reader = r } }

// WithClock sets the clock that stamps records and, when it also has a
// Sleep method (a k8s.io/utils/clock.Clock), times the short waits of a
// call that raced another; the default is the real one.
func WithClock(c clock.PassiveClock) Option { return func(l *Locker) { l.clock = c } }

// WithEventRecorder makes the Locker emit events on the Cluster.
func WithEventRecorder(r EventRecorder) Option { return func(l *Locker) { l.recorder = r } }

// WithTokens sets the source of the tokens that make each value written
// into a grant register and a lock record unique. The default draws 128
// random bits. The source must never return the same value twice, across
// every Locker of every process; tests that replay runs pass a
// deterministic one.
func WithTokens(next func() string) Option { return func(l *Locker) { l.tokens = next } }

// New returns a Locker that writes through c.
func New(c client.Client, opts ...Option) *Locker {
	l := &Locker{client: c, reader: c, clock: clock.RealClock{}, tokens: newToken}
	for _, o := range opts {
		o(l)
	}
	return l
}

// Result is the outcome of Lock.
type Result struct {
	// Acquired tells that the calling Machine holds the lock.
	Acquired bool
	// Holder is the Machine that holds the lock.
	Holder string
	// Verdict is what Lock found.
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
// A lock held by another existing Machine is not an error: the Result says
// who holds it. Errors wrap ErrClusterPaused, ErrClusterGone,
// ErrStaleMachine, ErrNotALock, ErrCorruptLock, ErrInvalidName,
// ErrContended or an API error.
func (l *Locker) Lock(ctx context.Context, cluster, machine client.Object) (Result, error) {
	cl, m, lockName, err := l.prepare(cluster, machine)
	if err != nil {
		return Result{}, err
	}
	if cl.Paused {
		return Result{}, pausedError(cl)
	}
	log := ctrl.LoggerFrom(ctx).WithValues("cluster", klog.KRef(cl.Namespace, cl.Name), "machine", m.Name)
	a := &acquisition{l: l, clusterObj: cluster, cl: cl, m: m, lockName: lockName, log: log}
	if !cl.Initialized && !cl.Grant.Held() && !cl.Grant.Damaged() {
		if res, ok, err := a.free(ctx); ok || err != nil {
			return res, err
		}
	}
	return a.settle(ctx)
}

// acquisition is one Lock call.
type acquisition struct {
	l          *Locker
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
	// heldBefore tells that a lock this call rewrote named the caller
	// before (Observation.HeldBefore).
	heldBefore bool
}

// free is the free path: the register was empty as the caller saw it, so
// the caller creates the lock and claims the register with one token, and
// reads its own Machine, all in parallel. The lock is acquired when all
// three succeed: the Create proves there was no lock, the claim's
// compare-and-swap that the register named no one (and that the Cluster is
// the one seen and not paused), and the read that the caller is the live
// Machine. ok is false when any of them did not settle it: the caller then
// reads everything live and decides.
func (a *acquisition) free(ctx context.Context) (Result, bool, error) {
	token := a.token()
	var (
		cerr, gerr, merr error
		live             *Machine
		wg               sync.WaitGroup
	)
	wg.Go(func() {
		_, cerr = createLock(ctx, a.l.client, a.cl, a.lockName, a.record(a.m, token))
	})
	wg.Go(func() { gerr = a.claim(ctx, a.cl, token) })
	wg.Go(func() { live, merr = getMachine(ctx, a.l.reader, a.cl.APIVersion, a.cl.Namespace, a.m.Name) })
	wg.Wait()
	a.noteLockWrite(cerr)
	switch {
	case cerr == nil && gerr == nil && merr == nil && live != nil && (a.m.UID == "" || live.UID == a.m.UID):
		a.acquired(ActionCreate)
		return Result{Acquired: true, Holder: a.m.Name, Verdict: VerdictFree, Action: ActionCreate}, true, nil
	case cerr != nil && definite(cerr) && !lostRace(cerr):
		return Result{}, false, fmt.Errorf("lock %s/%s: create for machine %s: %w", a.cl.Namespace, a.lockName, a.m.Name, cerr)
	case gerr != nil && definite(gerr) && !lostRace(gerr):
		return Result{}, false, a.registerError(gerr)
	}
	return Result{}, false, nil
}

// settle reads everything live, decides, and writes what the decision
// says, the register and the lock in parallel; a write that lost a race,
// or failed without telling whether it was applied, starts it again.
func (a *acquisition) settle(ctx context.Context) (Result, error) {
	var last error
	waits := 0
	for range maxAttempts {
		obs, cm, err := Read(ctx, From(a.l.reader), Query{Namespace: a.cl.Namespace, ClusterName: a.cl.Name,
			APIVersion: a.cl.APIVersion, Intent: IntentLock, Caller: &a.m})
		if err != nil {
			return Result{}, fmt.Errorf("lock %s/%s: %w", a.cl.Namespace, a.lockName, err)
		}
		obs.Tokens, obs.Uncertain, obs.ClaimUncertain, obs.HeldBefore = a.tokens, a.uncertain, a.claimUncertain, a.heldBefore
		d := Decide(obs, Policy{}, a.l.clock.Now())
		if obs.Cluster != nil {
			a.cl = *obs.Cluster
		}
		if d.Err != nil {
			raced, err := a.refuse(ctx, cm, obs, d)
			if raced {
				continue
			}
			return Result{Verdict: d.Verdict, Holder: d.Holder}, errors.Join(a.decisionError(d), err)
		}
		if !d.Acquired && a.racing(obs, d) && waits < maxRacingWaits {
			waits++
			// Another caller wrote the lock in the same moment as this
			// call claimed the register: it hands the lock over as soon as
			// it sees the claim. Wait for that, rather than take a lock
			// that names an existing Machine.
			a.log.V(4).Info("Lock written by a racing caller, waiting for it to hand it over", "holder", d.Holder)
			if err := a.l.sleep(ctx, backoff(waits)); err != nil {
				return Result{}, err
			}
			continue
		}
		if !d.Acquired {
			res, raced, err := a.refused(ctx, cm, obs, d)
			if raced {
				continue
			}
			return res, err
		}
		err = a.write(ctx, cm, d)
		if err == nil {
			a.acquired(d.Action)
			return Result{Acquired: true, Holder: a.m.Name, Verdict: d.Verdict, Action: d.Action,
				Recreated: d.Action == ActionCreate && d.Verdict == VerdictLost}, nil
		}
		if fatal(err) {
			return Result{}, err
		}
		a.log.V(4).Info("Lock changed under us, retrying", "action", d.Action, "register", d.Register, "reason", err.Error())
		last = err
	}
	return Result{}, lockError(a.cl.Namespace, a.lockName, fmt.Errorf("%w: %d rounds in a row did not settle (last: %w)", ErrContended, maxAttempts, last))
}

// racing tells whether the caller is refused only because another caller
// wrote the lock while this call claimed the register: the register holds
// this call's grant, and the lock, naming another existing Machine, was
// written by initlock's Lock (it carries a token) after this call began.
func (a *acquisition) racing(obs Observation, d Decision) bool {
	g := obs.Cluster
	if d.Verdict != VerdictConflict || g == nil || !g.Grant.Held() || !obs.mine(g.Grant.Token) || obs.Lock == nil {
		return false
	}
	return obs.Lock.Record.Token != "" && !obs.mine(obs.Lock.Record.Token)
}

// backoff is how long a racing call waits before it reads again, the nth
// time.
func backoff(n int) time.Duration { return time.Duration(10<<(n-1)) * time.Millisecond }

// sleep waits d, with the clock's Sleep when it has one (a clock.Clock, as
// tests inject).
func (l *Locker) sleep(ctx context.Context, d time.Duration) error {
	if c, ok := l.clock.(interface{ Sleep(time.Duration) }); ok {
		c.Sleep(d)
		return ctx.Err()
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}

// write carries out an acquiring decision: the claim of the register and
// the write of the lock, with one fresh token, in parallel.
func (a *acquisition) write(ctx context.Context, cm *corev1.ConfigMap, d Decision) error {
	token := ""
	if d.Register == RegisterClaim {
		token = a.token()
	}
	var gerr, lerr error
	var wg sync.WaitGroup
	if d.Register == RegisterClaim {
		cl := a.cl
		wg.Go(func() { gerr = a.claim(ctx, cl, token) })
	}
	wg.Go(func() {
		switch d.Action {
		case ActionCreate:
			_, lerr = createLock(ctx, a.l.client, a.cl, a.lockName, a.record(a.m, token))
			a.noteLockWrite(lerr)
		case ActionTakeOver:
			if lk := ObserveLock(cm, a.cl.Name); lk.Problem == nil && lk.Record.Names(&a.cl, &a.m) {
				a.heldBefore = true
			}
			_, lerr = rewriteLock(ctx, a.l.client, cm, a.cl, a.record(a.m, token))
			a.noteLockWrite(lerr)
		case ActionAdopt:
			_, lerr = adoptLock(ctx, a.l.client, cm, a.cl)
		}
	})
	wg.Wait()
	if gerr != nil {
		gerr = a.registerError(gerr)
	}
	if lerr != nil {
		lerr = fmt.Errorf("lock %s/%s: %s for machine %s: %w", a.cl.Namespace, a.lockName, d.Action, a.m.Name, lerr)
	}
	return errors.Join(gerr, lerr)
}

// fatal tells whether one of the errors of a round of writes is a refusal
// that trying again will not change (a permission, say), rather than a
// race lost or a failure whose outcome is unknown.
func fatal(err error) bool {
	var errs []error
	if j, ok := err.(interface{ Unwrap() []error }); ok {
		errs = j.Unwrap()
	} else {
		errs = []error{err}
	}
	for _, e := range errs {
		if definite(e) && !lostRace(e) {
			return true
		}
	}
	return false
}

// refused carries out a decision that does not grant the caller the lock:
// the lock is given back to the Machine the register names when it was
// lost, names a gone Machine or was written by this call, and a grant this
// call recorded is withdrawn when that is safe. A write that fails is left:
// the register decides, and the next call looks again; a withdrawal that
// lost a race (raced) is decided again on a fresh read.
func (a *acquisition) refused(ctx context.Context, cm *corev1.ConfigMap, obs Observation, d Decision) (Result, bool, error) {
	// The lock was lost when it is missing, or when this call created it
	// (the caller's view was stale) and now hands it to the granted one.
	recreated := d.Action == ActionRecreate || (d.Action == ActionYield && obs.Lock != nil && obs.mine(obs.Lock.Record.Token))
	res := Result{Holder: d.Holder, Verdict: d.Verdict, Action: d.Action, Recreated: recreated}
	if raced, err := a.refuse(ctx, cm, obs, d); raced || err != nil {
		return res, raced, err
	}
	switch {
	case recreated:
		a.l.event(a.clusterObj, corev1.EventTypeWarning, EventLockRecreated, "Recreated lost init lock %s for its granted holder %s; %s was refused", a.lockName, d.Holder, a.m.Name)
	case d.Action == ActionYield:
		a.l.event(a.clusterObj, corev1.EventTypeWarning, EventLockRecreated, "Init lock handed to its granted holder %s; %s was refused", d.Holder, a.m.Name)
	}
	return res, false, nil
}

// refuse makes the writes of a refusal, in parallel. raced tells that the
// withdrawal lost a race: the register changed since it was read (a claim
// of this call applied late, say).
func (a *acquisition) refuse(ctx context.Context, cm *corev1.ConfigMap, obs Observation, d Decision) (raced bool, err error) {
	var gerr, lerr error
	var wg sync.WaitGroup
	if d.Register == RegisterWithdraw {
		cl, value := a.cl, releasedGrant(a.token(), a.l.clock.Now())
		wg.Go(func() {
			if _, gerr = writeRegister(ctx, a.l.client, cl, value); gerr == nil {
				// The register holds a value no claim of this call tests.
				a.claimUncertain = false
			}
		})
	}
	if d.Action == ActionRelease && cm != nil {
		// A lock this call created and that stands for no grant: deleted
		// only as read (UID and resourceVersion).
		wg.Go(func() { lerr = client.IgnoreNotFound(deleteLock(ctx, a.l.client, cm)) })
	}
	if d.Action == ActionRecreate || d.Action == ActionYield {
		a.log.Info("The grant register names another machine, handing the lock to it", "holder", d.Holder)
		rec := Record{Ref: Ref{MachineName: d.Holder, ClusterUID: a.cl.UID}, HandedOverBy: a.m.Name}
		if obs.Granted != nil {
			rec.MachineUID = obs.Granted.UID
		}
		wg.Go(func() {
			if d.Action == ActionRecreate {
				_, lerr = createLock(ctx, a.l.client, a.cl, a.lockName, rec)
			} else {
				_, lerr = rewriteLock(ctx, a.l.client, cm, a.cl, rec)
			}
		})
	}
	wg.Wait()
	raced = gerr != nil && lostRace(gerr)
	if gerr != nil && !lostRace(gerr) {
		gerr = fmt.Errorf("withdrawing the init-lock grant of machine %s from cluster %s/%s: %w", a.m.Name, a.cl.Namespace, a.cl.Name, gerr)
	} else {
		gerr = nil
	}
	if lerr != nil && !lostRace(lerr) {
		lerr = fmt.Errorf("lock %s/%s: %s: %w", a.cl.Namespace, a.lockName, refusalWrite(d), lerr)
	} else {
		lerr = nil
	}
	return raced, errors.Join(gerr, lerr)
}

// refusalWrite names the write a refusal makes to the lock, for errors.
func refusalWrite(d Decision) string {
	if d.Action == ActionRelease {
		return "deleting the lock this call created"
	}
	return "handing it to machine " + d.Holder
}

// claim writes a grant for the caller with token into the register of cl,
// as cl was read, and keeps the caller's Cluster object in step.
func (a *acquisition) claim(ctx context.Context, cl Cluster, token string) error {
	u, err := writeRegister(ctx, a.l.client, cl, newGrant(cl, a.m, token, a.l.clock.Now()))
	switch {
	case err == nil:
		syncCaller(a.clusterObj, u)
	case !definite(err):
		a.claimUncertain = true
	}
	return err
}

func (a *acquisition) record(m Machine, token string) Record {
	at := a.l.clock.Now().UTC().Truncate(time.Second)
	return Record{Ref: refTo(a.cl, m), Token: token, AcquiredAt: &at}
}

// token returns a fresh token and remembers it as this call's.
func (a *acquisition) token() string {
	t := a.l.tokens()
	a.tokens = append(a.tokens, t)
	return t
}

// noteLockWrite remembers a write of the lock that may have been applied
// unseen.
func (a *acquisition) noteLockWrite(err error) {
	if err != nil && !definite(err) {
		a.uncertain = true
	}
}

func (a *acquisition) registerError(err error) error {
	if apierrors.IsForbidden(err) {
		return fmt.Errorf("recording the init-lock grant of machine %s on cluster %s/%s: %w; the bootstrap provider needs \"get\" and \"patch\" on \"clusters.cluster.x-k8s.io\"", a.m.Name, a.cl.Namespace, a.cl.Name, err)
	}
	return fmt.Errorf("recording the init-lock grant of machine %s on cluster %s/%s: %w", a.m.Name, a.cl.Namespace, a.cl.Name, err)
}

func (a *acquisition) decisionError(d Decision) error {
	cl := a.cl
	switch {
	case IsDamagedGrant(d.Err):
		return &Error{Namespace: cl.Namespace, Name: cl.Name, Kind: "cluster", Err: d.Err,
			Detail: "no machine can be granted the lock until it is repaired: once no machine of the cluster is running kubeadm init, run 'kubectl initlock release " + cl.Name + " -n " + cl.Namespace + " --force'"}
	case errors.Is(d.Err, ErrClusterGone):
		return &Error{Namespace: cl.Namespace, Name: cl.Name, Kind: "cluster", Err: d.Err,
			Detail: "a lock is only granted for an existing Cluster; nothing was changed"}
	case errors.Is(d.Err, ErrClusterPaused):
		return pausedError(cl)
	case errors.Is(d.Err, ErrStaleMachine):
		return &Error{Namespace: cl.Namespace, Name: a.m.Name, Kind: "machine", Err: d.Err,
			Detail: fmt.Sprintf("the object passed has UID %s, which is not the live Machine of that name (deleted, or created again); nothing was granted: call again with the live Machine", a.m.UID)}
	}
	return lockError(cl.Namespace, a.lockName, d.Err)
}

func (a *acquisition) acquired(action Action) {
	l, m := a.l, a.m
	switch action {
	case ActionCreate:
		l.event(a.clusterObj, corev1.EventTypeNormal, EventLockAcquired, "Machine %s acquired the init lock", m.Name)
	case ActionTakeOver:
		l.event(a.clusterObj, corev1.EventTypeNormal, EventLockTakenOver, "Machine %s took over the init lock", m.Name)
	case ActionAdopt:
		l.event(a.clusterObj, corev1.EventTypeNormal, EventLockAdopted, "Init lock re-adopted by cluster UID %s", a.cl.UID)
	}
	a.log.V(2).Info("Init lock acquired", "action", action)
}

func (l *Locker) prepare(cluster, machine client.Object) (Cluster, Machine, string, error) {
	if cluster == nil || machine == nil {
		return Cluster{}, Machine{}, "", fmt.Errorf("%w: Lock needs a cluster and a machine", ErrInvalidName)
	}
	cl, err := ClusterFrom(cluster, l.client.Scheme())
	if err != nil {
		return Cluster{}, Machine{}, "", err
	}
	m, err := MachineFrom(machine, l.client.Scheme())
	if err != nil {
		return Cluster{}, Machine{}, "", err
	}
	lockName, err := LockName(cl.Name)
	if err != nil {
		return Cluster{}, Machine{}, "", &Error{Namespace: cl.Namespace, Name: truncate(cl.Name), Kind: "cluster", Err: err,
			Detail: "a lock name must be a DNS subdomain of at most 253 characters and the cluster name a label value of at most 63"}
	}
	if m.Name == "" || m.Namespace != cl.Namespace {
		return Cluster{}, Machine{}, "", &Error{Namespace: cl.Namespace, Name: m.Name, Kind: "machine", Err: ErrInvalidName,
			Detail: fmt.Sprintf("the machine must be named and live in the cluster's namespace (it is in %q)", m.Namespace)}
	}
	return cl, m, lockName, nil
}

func pausedError(cl Cluster) error {
	return &Error{Namespace: cl.Namespace, Name: cl.Name, Kind: "cluster", Err: ErrClusterPaused,
		Detail: "the lock is left as it is; unpause the cluster (spec.paused, annotation " + capi.PausedAnnotation + ") and try again"}
}

func lockError(namespace, name string, err error) error {
	detail := "inspect it with 'kubectl initlock list'"
	switch {
	case errors.Is(err, ErrNotALock):
		detail = "it is not an init lock; refusing to touch it. Rename or remove it, or rename the cluster"
	case errors.Is(err, ErrCorruptLock):
		detail = "it is not taken over silently; repair it with 'kubectl initlock release' once no machine is running kubeadm init"
	case errors.Is(err, ErrClusterPaused):
		detail = "unpause the cluster and try again"
	case errors.Is(err, ErrContended):
		detail = "call again"
	}
	return &Error{Namespace: namespace, Name: name, Kind: "configmap", Err: err, Detail: detail}
}

func (l *Locker) event(regarding client.Object, eventtype, reason, note string, args ...any) {
	if l.recorder == nil {
		return
	}
	l.recorder.Eventf(regarding, nil, eventtype, reason, "InitLock", note, args...)
}
