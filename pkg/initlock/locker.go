package initlock

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/initlock/initlock/internal/capi"
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

// maxAttempts bounds the optimistic-concurrency retries of one call.
const maxAttempts = 8

// Locker acquires and releases clusters' init locks. It is safe for
// concurrent use.
type Locker struct {
	client   client.Client
	reader   client.Reader
	clock    clock.PassiveClock
	recorder EventRecorder
}

// Option configures a Locker.
type Option func(*Locker)

// WithAPIReader makes the Locker read the lock, the Cluster and the
// Machines through r, which must read the API server directly (a
// manager's GetAPIReader), never a possibly stale cache. Without it the
// client passed to New must itself be uncached.
func WithAPIReader(r client.Reader) Option { return func(l *Locker) { l.reader = r } }

// WithClock sets the clock that stamps records; the default is the real one.
func WithClock(c clock.PassiveClock) Option { return func(l *Locker) { l.clock = c } }

// WithEventRecorder makes the Locker emit events on the Cluster.
func WithEventRecorder(r EventRecorder) Option { return func(l *Locker) { l.recorder = r } }

// New returns a Locker that writes through c.
func New(c client.Client, opts ...Option) *Locker {
	l := &Locker{client: c, reader: c, clock: clock.RealClock{}}
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
// the client's scheme), unstructured or, for machine, metadata-only. Lock
// takes the grant register from the cluster object passed, which may come
// from a cache, and writes what it records there back into that object, so
// that a later call with the same object makes no write; concurrent calls
// must not share one object.
//
// A lock held by another existing Machine is not an error: the Result says
// who holds it. Errors wrap ErrClusterPaused, ErrNotALock, ErrCorruptLock,
// ErrInvalidName, ErrContended or an API error.
func (l *Locker) Lock(ctx context.Context, cluster, machine client.Object) (Result, error) {
	cl, m, lockName, err := l.prepare(cluster, machine)
	if err != nil {
		return Result{}, err
	}
	log := ctrl.LoggerFrom(ctx).WithValues("cluster", klog.KRef(cl.Namespace, cl.Name), "machine", m.Name)
	if cl.Paused {
		return Result{}, pausedError(cl)
	}
	a := &acquisition{l: l, clusterObj: cluster, cl: cl, m: m, lockName: lockName, log: log}
	res, err := a.run(ctx)
	if a.claimed != "" && !res.Acquired {
		// A grant recorded in this call must not outlive it unused.
		err = errors.Join(err, a.withdraw(ctx))
	}
	return res, err
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
	// claimed is the grant this call wrote into the register, "" when none;
	// created tells that this call created the lock ConfigMap.
	claimed string
	created bool
}

// run takes the fastest path the caller's view of the grant register
// allows, and falls back to reading everything live and deciding on that.
func (a *acquisition) run(ctx context.Context) (Result, error) {
	g := a.cl.Grant
	switch {
	case a.cl.Initialized:
	case g.Names(a.cl, a.m):
		if res, ok, err := a.relock(ctx); ok || err != nil {
			return res, err
		}
	case g == nil:
		if res, ok, err := a.race(ctx); ok || err != nil {
			return res, err
		}
	}
	return a.settle(ctx)
}

// relock is the holder's Lock: the register names the caller, so a lock
// that names it, written by itself, is its own. One read; one write when
// the lock needs re-adopting. ok is false when the lock is anything else:
// the caller then decides on a live read of everything.
func (a *acquisition) relock(ctx context.Context) (Result, bool, error) {
	cm, err := a.l.getLock(ctx, a.cl.Namespace, a.lockName)
	if err != nil || cm == nil {
		return Result{}, false, err
	}
	lk := ObserveLock(cm, a.cl.Name)
	if lk.Problem != nil || lk.Record.MachineName != a.m.Name || lk.Record.HandedOverBy != "" {
		return Result{}, false, nil
	}
	d := Decide(Observation{ClusterName: a.cl.Name, Lock: lk, Cluster: &a.cl, Holder: &a.m, Caller: &a.m}, Policy{}, a.l.clock.Now())
	switch {
	case !d.Acquired || d.Claim:
		return Result{}, false, nil
	case d.Action == ActionNone:
		return Result{Acquired: true, Holder: a.m.Name, Verdict: d.Verdict, Action: ActionNone}, true, nil
	case d.Action != ActionAdopt:
		return Result{}, false, nil
	}
	if _, err := a.l.adopt(ctx, cm, a.cl, a.m.UID); retry(err) {
		return Result{}, false, nil
	} else if err != nil {
		return Result{}, false, fmt.Errorf("lock %s/%s: %s for machine %s: %w", a.cl.Namespace, a.lockName, d.Action, a.m.Name, err)
	}
	a.acquired(ActionAdopt)
	return Result{Acquired: true, Holder: a.m.Name, Verdict: d.Verdict, Action: ActionAdopt}, true, nil
}

// race is the free path: the register was empty as the caller saw it, so
// the caller creates the lock and claims the register at once, in parallel.
// Both succeed only if the lock was free: Create is atomic, and the
// register's compare-and-swap lets one Machine in. ok is false when either
// lost: the caller then decides on a live read of everything, and hands the
// lock to the register's Machine if it created it.
func (a *acquisition) race(ctx context.Context) (Result, bool, error) {
	var (
		value      string
		cerr, gerr error
		wg         sync.WaitGroup
	)
	wg.Go(func() {
		_, cerr = a.l.create(ctx, a.cl, Record{MachineName: a.m.Name, MachineUID: a.m.UID}, a.lockName)
	})
	wg.Go(func() { value, gerr = a.l.claim(ctx, a.cl, nil, a.m) })
	wg.Wait()
	a.noteClaim(value, gerr)
	a.created = cerr == nil
	switch {
	case cerr == nil && gerr == nil:
		a.acquired(ActionCreate)
		return Result{Acquired: true, Holder: a.m.Name, Verdict: VerdictFree, Action: ActionCreate}, true, nil
	case cerr != nil && !apierrors.IsAlreadyExists(cerr):
		return Result{}, false, fmt.Errorf("lock %s/%s: create for machine %s: %w", a.cl.Namespace, a.lockName, a.m.Name, cerr)
	case gerr != nil && !casFailed(gerr):
		return Result{}, false, gerr
	}
	return Result{}, false, nil
}

// settle reads the lock, the Cluster and the Machines they name live,
// decides, and writes: the register first when the decision claims it,
// then the lock. A write that loses a race starts it again.
func (a *acquisition) settle(ctx context.Context) (Result, error) {
	l, m := a.l, a.m
	var last error
	for range maxAttempts {
		obs, cm, err := a.observe(ctx)
		if err != nil {
			return Result{}, err
		}
		d := Decide(obs, Policy{}, l.clock.Now())
		switch {
		case errors.Is(d.Err, errDamagedGrant):
			return Result{Verdict: d.Verdict}, &Error{Namespace: a.cl.Namespace, Name: a.cl.Name, Kind: "cluster", Err: d.Err,
				Detail: "no machine can be granted the lock until it is repaired: once no machine of the cluster is running kubeadm init, remove the annotation " + GrantAnnotation + " from the Cluster"}
		case d.Err != nil:
			return Result{Verdict: d.Verdict, Holder: d.Holder}, lockError(a.cl.Namespace, a.lockName, d.Err)
		case d.Action == ActionRecreate || d.Action == ActionYield:
			return a.handOver(ctx, cm, obs, d)
		case !d.Acquired:
			return Result{Holder: d.Holder, Verdict: d.Verdict, Action: d.Action}, nil
		}
		if d.Claim {
			value, err := l.claim(ctx, a.cl, a.cl.Grant, m)
			if casFailed(err) {
				last = err
				continue
			}
			a.noteClaim(value, err)
			if err != nil {
				return Result{}, err
			}
		}
		switch d.Action {
		case ActionNone:
		case ActionCreate:
			_, err = l.create(ctx, a.cl, Record{MachineName: m.Name, MachineUID: m.UID}, a.lockName)
			a.created = a.created || err == nil
		case ActionAdopt:
			_, err = l.adopt(ctx, cm, a.cl, m.UID)
		case ActionTakeOver:
			_, err = l.rewrite(ctx, cm, a.cl, Record{MachineName: m.Name, MachineUID: m.UID})
		default:
			return Result{}, fmt.Errorf("lock %s/%s: unexpected action %q for a caller", a.cl.Namespace, a.lockName, d.Action)
		}
		if retry(err) {
			a.log.V(4).Info("Lock changed under us, retrying", "action", d.Action)
			last = err
			continue
		}
		if err != nil {
			return Result{}, fmt.Errorf("lock %s/%s: %s for machine %s: %w", a.cl.Namespace, a.lockName, d.Action, m.Name, err)
		}
		a.acquired(d.Action)
		return Result{Acquired: true, Holder: m.Name, Verdict: d.Verdict, Action: d.Action,
			Recreated: d.Action == ActionCreate && d.Verdict == VerdictLost}, nil
	}
	return Result{}, lockError(a.cl.Namespace, a.lockName, fmt.Errorf("%w: %d conflicting writes in a row (last: %w)", ErrContended, maxAttempts, last))
}

// observe reads the lock and the Cluster live, in parallel, then the
// Machines they name (the lock's holder and the register's), in parallel.
func (a *acquisition) observe(ctx context.Context) (Observation, *corev1.ConfigMap, error) {
	l := a.l
	cm, cl, err := l.readLockAndCluster(ctx, a.cl, a.lockName)
	if err != nil {
		return Observation{}, nil, err
	}
	if cl == nil {
		return Observation{}, nil, &Error{Namespace: a.cl.Namespace, Name: a.cl.Name, Kind: "cluster", Err: ErrClusterGone,
			Detail: "a lock is only granted for an existing Cluster; nothing was changed"}
	}
	if cl.Paused {
		return Observation{}, nil, pausedError(*cl)
	}
	a.cl = *cl
	obs := Observation{ClusterName: cl.Name, Cluster: cl, Caller: &a.m}
	if cm != nil {
		obs.Lock = ObserveLock(cm, cl.Name)
	}
	var holder, granted string
	if obs.Lock != nil && obs.Lock.Problem == nil {
		holder = obs.Lock.Record.MachineName
	}
	if g := cl.Grant; g != nil && !g.Damaged() && !cl.Initialized {
		granted = g.MachineName
	}
	machines, err := l.getMachines(ctx, cl.Namespace, a.m, holder, granted)
	if err != nil {
		return Observation{}, nil, err
	}
	obs.Holder, obs.Granted = machines[holder], machines[granted]
	return obs, cm, nil
}

// handOver writes the lock for the Machine the grant register names (it
// creates it when it was lost), marked as handed over by the caller, and
// refuses the caller. A lock changed meanwhile is left as it is: the
// register decides.
func (a *acquisition) handOver(ctx context.Context, cm *corev1.ConfigMap, obs Observation, d Decision) (Result, error) {
	l, cl := a.l, a.cl
	a.log.Info("The grant register names another machine, handing the lock to it", "holder", d.Holder)
	rec := Record{MachineName: d.Holder, HandedOverBy: a.m.Name}
	if obs.Granted != nil {
		rec.MachineUID = obs.Granted.UID
	}
	var werr error
	if cm == nil {
		_, werr = l.create(ctx, cl, rec, a.lockName)
	} else {
		_, werr = l.rewrite(ctx, cm, cl, rec)
	}
	if retry(werr) {
		werr = nil
	}
	if werr != nil {
		return Result{}, fmt.Errorf("lock %s/%s: handing it to machine %s: %w", cl.Namespace, a.lockName, d.Holder, werr)
	}
	res := Result{Holder: d.Holder, Verdict: d.Verdict, Action: d.Action}
	if cm == nil || a.created {
		res.Verdict, res.Action, res.Recreated = VerdictLost, ActionRecreate, true
		l.event(a.clusterObj, corev1.EventTypeWarning, EventLockRecreated, "Recreated lost init lock %s for its granted holder %s; %s was refused", a.lockName, d.Holder, a.m.Name)
	} else {
		l.event(a.clusterObj, corev1.EventTypeWarning, EventLockRecreated, "Init lock handed to its granted holder %s; %s was refused", d.Holder, a.m.Name)
	}
	return res, nil
}

// noteClaim records the outcome of a claim. A claim whose answer was lost
// may have been applied: it is withdrawn like one that was, should the
// call not acquire the lock.
func (a *acquisition) noteClaim(value string, err error) {
	switch {
	case err == nil:
		a.claimed = value
		setGrant(a.clusterObj, value)
	case !casFailed(err):
		a.claimed = value
	}
}

// withdraw empties the register of the grant this call wrote.
func (a *acquisition) withdraw(ctx context.Context) error {
	value := a.claimed
	a.claimed = ""
	if g := GrantFrom(a.clusterObj.GetAnnotations()); g != nil && g.raw == value {
		setGrant(a.clusterObj, "")
	}
	if err := a.l.withdraw(ctx, a.cl, value); !casFailed(err) {
		return err
	}
	return nil // the register holds another value: the grant is not there
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

// UnlockOption configures Unlock.
type UnlockOption func(*unlockOptions)

type unlockOptions struct {
	anyHolder bool
	// uid and resourceVersion, when set, are what the lock must still be.
	uid             types.UID
	resourceVersion string
}

// AnyHolder makes Unlock release the lock whoever holds it, and release a
// corrupt lock too. machine may then be nil.
func AnyHolder() UnlockOption { return func(o *unlockOptions) { o.anyHolder = true } }

// IfUnchanged makes Unlock release the lock only if it is still the object
// the caller inspected: same UID and resourceVersion. Otherwise Unlock
// returns a Conflict error and changes nothing.
func IfUnchanged(uid types.UID, resourceVersion string) UnlockOption {
	return func(o *unlockOptions) { o.uid, o.resourceVersion = uid, resourceVersion }
}

// Unlock releases cluster's lock held by machine: it empties the Cluster's
// grant register if it names the holder, then deletes the lock with the UID
// and resourceVersion it read as preconditions. A missing lock is success
// (the register is still emptied of machine's grant). Unlock never deletes
// a ConfigMap that is not a lock (ErrNotALock), a lock it cannot read
// (ErrCorruptLock, unless AnyHolder) or a lock another Machine holds
// (ErrNotHolder, unless AnyHolder). With AnyHolder it also empties a
// register that names another Machine or is damaged.
func (l *Locker) Unlock(ctx context.Context, cluster, machine client.Object, opts ...UnlockOption) error {
	var o unlockOptions
	for _, opt := range opts {
		opt(&o)
	}
	cl, err := ClusterFrom(cluster, l.client.Scheme())
	if err != nil {
		return err
	}
	lockName, err := LockName(cl.Name)
	if err != nil {
		return err
	}
	var m *Machine
	if machine != nil {
		mm, err := MachineFrom(machine, l.client.Scheme())
		if err != nil {
			return err
		}
		m = &mm
	} else if !o.anyHolder {
		return fmt.Errorf("unlocking %s/%s: no machine given; pass one or use AnyHolder", cl.Namespace, lockName)
	}
	for range maxAttempts {
		cm, live, err := l.readLockAndCluster(ctx, cl, lockName)
		if err != nil {
			return err
		}
		holder := ""
		if m != nil {
			holder = m.Name
		}
		if cm != nil {
			if o.uid != "" && (cm.UID != o.uid || cm.ResourceVersion != o.resourceVersion) {
				return apierrors.NewConflict(corev1.Resource("configmaps"), lockName,
					fmt.Errorf("lock %s/%s changed since it was inspected; look at it again", cl.Namespace, lockName))
			}
			lk := ObserveLock(cm, cl.Name)
			switch {
			case lk.Problem != nil && (errors.Is(lk.Problem, ErrNotALock) || !o.anyHolder):
				return lockError(cl.Namespace, lockName, lk.Problem)
			case lk.Problem == nil && !o.anyHolder && lk.Record.MachineName != m.Name:
				return &Error{Namespace: cl.Namespace, Name: lockName, Kind: "configmap", Err: ErrNotHolder,
					Detail: fmt.Sprintf("it is held by %s, not %s; use AnyHolder to release it anyway", lk.Record.MachineName, m.Name)}
			case lk.Problem == nil:
				holder = lk.Record.MachineName
			}
		}
		// Empty the register first: should the delete then fail, the lock
		// still names its holder, and nothing is granted twice.
		if live != nil && live.Grant != nil && (o.anyHolder || live.Grant.MachineName == holder) {
			err := l.withdraw(ctx, *live, live.Grant.raw)
			if casFailed(err) {
				continue
			}
			if err != nil {
				return err
			}
			if o.anyHolder || (m != nil && live.Grant.MachineName == m.Name) {
				setGrant(cluster, "")
			}
		}
		if cm == nil {
			return nil
		}
		err = l.client.Delete(ctx, cm, client.Preconditions{UID: &cm.UID, ResourceVersion: &cm.ResourceVersion})
		if retry(err) {
			continue
		}
		if err != nil {
			return fmt.Errorf("releasing lock %s/%s: %w", cl.Namespace, lockName, err)
		}
		l.event(cluster, corev1.EventTypeNormal, EventLockReleased, "Init lock held by %s released", holder)
		return nil
	}
	return lockError(cl.Namespace, lockName, fmt.Errorf("%w: %d conflicting writes in a row", ErrContended, maxAttempts))
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

// readLockAndCluster reads the lock and the Cluster live, in parallel;
// each is nil when it does not exist.
func (l *Locker) readLockAndCluster(ctx context.Context, cl Cluster, lockName string) (*corev1.ConfigMap, *Cluster, error) {
	var (
		cm          *corev1.ConfigMap
		live        *Cluster
		cmErr, cErr error
		wg          sync.WaitGroup
	)
	wg.Go(func() { cm, cmErr = l.getLock(ctx, cl.Namespace, lockName) })
	wg.Go(func() { live, cErr = l.getCluster(ctx, cl) })
	wg.Wait()
	return cm, live, errors.Join(cmErr, cErr)
}

func pausedError(cl Cluster) error {
	return &Error{Namespace: cl.Namespace, Name: cl.Name, Kind: "cluster", Err: ErrClusterPaused,
		Detail: "the lock is left as it is; unpause the cluster (spec.paused, annotation " + capi.PausedAnnotation + ") and try again"}
}

func (l *Locker) getLock(ctx context.Context, namespace, name string) (*corev1.ConfigMap, error) {
	cm := &corev1.ConfigMap{}
	err := l.reader.Get(ctx, client.ObjectKey{Namespace: namespace, Name: name}, cm)
	if apierrors.IsNotFound(err) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("reading lock %s/%s: %w", namespace, name, err)
	}
	return cm, nil
}

// getCluster reads the Cluster cl names live; nil when it does not exist.
func (l *Locker) getCluster(ctx context.Context, cl Cluster) (*Cluster, error) {
	u := clusterObject(cl)
	err := l.reader.Get(ctx, client.ObjectKeyFromObject(u), u)
	if apierrors.IsNotFound(err) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("reading cluster %s/%s: %w", cl.Namespace, cl.Name, err)
	}
	live, err := ClusterFrom(u, nil)
	if err != nil {
		return nil, err
	}
	return &live, nil
}

// getMachines reads live, in parallel and once each, the Machines named
// other than the caller. It returns the ones that exist, by name; the
// caller is among them.
func (l *Locker) getMachines(ctx context.Context, namespace string, caller Machine, names ...string) (map[string]*Machine, error) {
	var others []string
	for _, name := range names {
		if name != "" && name != caller.Name && !slices.Contains(others, name) {
			others = append(others, name)
		}
	}
	read := make([]*Machine, len(others))
	errs := make([]error, len(others))
	var wg sync.WaitGroup
	for i, name := range others {
		wg.Go(func() { read[i], errs[i] = l.getMachine(ctx, namespace, name, caller.APIVersion) })
	}
	wg.Wait()
	found := map[string]*Machine{caller.Name: &caller}
	for i, m := range read {
		if m != nil {
			found[others[i]] = m
		}
	}
	return found, errors.Join(errs...)
}

// getMachine reads a Machine's metadata live; nil when it does not exist.
func (l *Locker) getMachine(ctx context.Context, namespace, name, apiVersion string) (*Machine, error) {
	pom := &metav1.PartialObjectMetadata{}
	pom.SetGroupVersionKind(machineGVK(apiVersion))
	err := l.reader.Get(ctx, client.ObjectKey{Namespace: namespace, Name: name}, pom)
	if apierrors.IsNotFound(err) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("reading holder machine %s/%s: %w", namespace, name, err)
	}
	m, err := MachineFrom(pom, nil)
	if err != nil {
		return nil, err
	}
	return &m, nil
}

func machineGVK(apiVersion string) schema.GroupVersionKind {
	gv, err := schema.ParseGroupVersion(apiVersion)
	if err != nil || gv.Version == "" {
		return capi.MachineGVK(capi.V1Beta2)
	}
	return gv.WithKind(capi.MachineKind)
}

// retry tells whether err means the lock changed between read and write.
func retry(err error) bool {
	return apierrors.IsConflict(err) || apierrors.IsAlreadyExists(err) || apierrors.IsNotFound(err)
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
