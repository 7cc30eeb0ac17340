package initlock

import (
	"context"
	"errors"
	"fmt"
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

// WithAPIReader makes the Locker read the lock, the holder Machine and the
// grant records through r, which must read the API server directly (a
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

// Lock tries to acquire cluster's init lock for machine. cluster is a Cluster
// API Cluster and machine a Machine of it, each typed (registered in the
// client's scheme), unstructured or, for machine, metadata-only. When Lock
// records a grant on machine it also sets the annotation on the object
// passed, so that a later call with the same object makes no write.
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
		return Result{}, &Error{Namespace: cl.Namespace, Name: cl.Name, Kind: "cluster", Err: ErrClusterPaused,
			Detail: "the lock is left as it is; unpause the cluster (spec.paused, annotation " + capi.PausedAnnotation + ") and try again"}
	}
	a := &acquisition{l: l, clusterObj: cluster, machineObj: machine, cl: cl, m: m, lockName: lockName, log: log,
		hadGrant: m.Grant != nil && m.Grant.Cluster == cl.Name}
	res, err := a.run(ctx)
	if a.wrote && !res.Acquired {
		// A grant recorded in this call must not outlive it unconfirmed.
		err = errors.Join(err, a.withdraw(ctx))
	}
	return res, err
}

// acquisition is one Lock call.
type acquisition struct {
	l                      *Locker
	clusterObj, machineObj client.Object
	cl                     Cluster
	m                      Machine
	lockName               string
	log                    logr.Logger
	// hadGrant: the machine object passed in carried a grant for the
	// cluster. wrote: this call recorded the grant (or tried to), so it is
	// not one the caller held before.
	hadGrant, wrote bool
}

// run decides on the lock as read and, when the caller may acquire it,
// writes the lock, then records the grant and lists the grants live. A
// caller that carries no grant reads the grants along with the lock, so
// that it never writes a lock for itself while another Machine's grant
// stands: a lock that names a Machine which carries a grant is a confirmed
// acquisition or a hand-over to the earliest grant, which is what lets a
// healthy re-Lock trust it with one read.
func (a *acquisition) run(ctx context.Context) (Result, error) {
	l, cl, m := a.l, a.cl, a.m
	for range maxAttempts {
		obs, cm, err := a.observe(ctx)
		if err != nil {
			return Result{}, err
		}
		d := Decide(obs, Policy{}, l.clock.Now())
		switch {
		case d.Err != nil:
			return Result{Verdict: d.Verdict, Holder: d.Holder}, lockError(cl.Namespace, a.lockName, d.Err)
		case d.Action == ActionRecreate || d.Action == ActionYield:
			return a.handOver(ctx, cm, obs.Grants, d)
		case !d.Acquired:
			return Result{Holder: d.Holder, Verdict: d.Verdict, Action: d.Action}, nil
		case a.held() && d.Action == ActionNone:
			return Result{Acquired: true, Holder: m.Name, Verdict: d.Verdict, Action: ActionNone}, nil // a healthy re-Lock: one read
		}
		switch d.Action {
		case ActionNone:
		case ActionCreate:
			cm, err = l.create(ctx, cl, Record{MachineName: m.Name, MachineUID: m.UID}, a.lockName)
		case ActionAdopt:
			cm, err = l.adopt(ctx, cm, cl, m.UID)
		case ActionTakeOver:
			cm, err = l.rewrite(ctx, cm, cl, Record{MachineName: m.Name, MachineUID: m.UID})
		default:
			return Result{}, fmt.Errorf("lock %s/%s: unexpected action %q for a caller", cl.Namespace, a.lockName, d.Action)
		}
		if retry(err) {
			a.log.V(4).Info("Lock changed under us, retrying", "action", d.Action)
			continue
		}
		if err != nil {
			return Result{}, fmt.Errorf("lock %s/%s: %s for machine %s: %w", cl.Namespace, a.lockName, d.Action, m.Name, err)
		}
		return a.confirm(ctx, cm, Result{Acquired: true, Holder: m.Name, Verdict: d.Verdict, Action: d.Action,
			Recreated: d.Action == ActionCreate && d.Verdict == VerdictLost})
	}
	return Result{}, lockError(cl.Namespace, a.lockName, fmt.Errorf("%w: %d conflicting writes in a row", ErrContended, maxAttempts))
}

// held tells whether the caller came in with a grant, as far as the object
// passed shows, and has not recorded one in this call.
func (a *acquisition) held() bool { return a.hadGrant && !a.wrote }

// observe reads the lock and, when another Machine holds it, that Machine,
// live. A caller without a grant also lists the grants, in parallel with
// reading the lock; a holder that carries a grant is then known to exist.
func (a *acquisition) observe(ctx context.Context) (Observation, *corev1.ConfigMap, error) {
	l, cl, m := a.l, a.cl, a.m
	if a.held() {
		return l.observe(ctx, cl, m, a.lockName, nil)
	}
	var (
		grants []Machine
		lerr   error
		wg     sync.WaitGroup
	)
	// This list only keeps the caller from writing the lock over a grant
	// that has stood for a while, so it may come from the API server's watch
	// cache ("0": any version); the list that decides is the one after the
	// caller's grant write, which is at least as recent as that write.
	wg.Go(func() { grants, lerr = l.listGrants(ctx, cl, m.APIVersion, "0") })
	obs, cm, err := l.observe(ctx, cl, m, a.lockName, func() ([]Machine, error) {
		wg.Wait()
		return grants, lerr
	})
	wg.Wait()
	if err = errors.Join(err, lerr); err != nil {
		return Observation{}, nil, err
	}
	obs.Grants = grants
	caller := m
	caller.Grant = nil
	obs.Caller = &caller
	return obs, cm, nil
}

// confirm makes an acquisition durable: it records the grant on the caller,
// then lists the cluster's grants live. If another Machine's grant stands
// in the way, the lock goes to that Machine and the caller is refused.
func (a *acquisition) confirm(ctx context.Context, cm *corev1.ConfigMap, res Result) (Result, error) {
	grants, err := a.grantAndList(ctx)
	if err != nil {
		return Result{}, err
	}
	caller := a.m
	if a.wrote {
		caller.Grant = nil // recorded now, not held before
	}
	obs := Observation{ClusterName: a.cl.Name, Lock: ObserveLock(cm, a.cl.Name), Cluster: &a.cl, Holder: &a.m, Caller: &caller, Grants: grants}
	if d := Decide(obs, Policy{}, a.l.clock.Now()); d.Action == ActionYield {
		return a.handOver(ctx, cm, grants, d)
	}
	a.acquired(res.Action)
	return res, nil
}

// grantAndList records the grant on the caller unless it carries one, then
// lists the cluster's grants live. The grant is always written before the
// list, never after: that order is what lets two racing callers never both
// succeed.
func (a *acquisition) grantAndList(ctx context.Context) ([]Machine, error) {
	// After a grant write, the list need only be as recent as that write:
	// of two callers, the one that wrote second then sees the first's grant.
	// The API server answers it from its watch cache without waiting for a
	// consistent read.
	var rv string
	if !a.hadGrant && !a.wrote {
		a.wrote = true
		var err error
		if rv, err = a.l.writeGrant(ctx, a.machineObj, a.m, a.cl.Name); err != nil {
			return nil, err
		}
	}
	grants, err := a.l.listGrants(ctx, a.cl, a.m.APIVersion, rv)
	if err != nil || hasMachine(grants, a.m.Name) {
		return grants, err
	}
	// The object we were given was stale: its grant is gone.
	a.wrote = true
	if rv, err = a.l.writeGrant(ctx, a.machineObj, a.m, a.cl.Name); err != nil {
		return nil, err
	}
	return a.l.listGrants(ctx, a.cl, a.m.APIVersion, rv)
}

// handOver gives the lock to the Machine with the earliest other grant:
// it writes the lock for it (creating it when it was lost) and withdraws
// the caller's grant. A lock changed meanwhile is left as it is: the grants
// decide.
func (a *acquisition) handOver(ctx context.Context, cm *corev1.ConfigMap, grants []Machine, d Decision) (Result, error) {
	l, cl := a.l, a.cl
	a.log.Info("Another machine holds a grant for this cluster, handing the lock to it", "holder", d.Holder)
	rec := Record{MachineName: d.Holder, MachineUID: holderUID(grants, d.Holder)}
	var werr error
	if cm == nil {
		_, werr = l.create(ctx, cl, rec, a.lockName)
	} else {
		_, werr = l.rewrite(ctx, cm, cl, rec)
	}
	if retry(werr) {
		werr = nil
	}
	if a.wrote || a.hadGrant {
		a.wrote = false // withdrawn here
		werr = errors.Join(werr, a.withdraw(ctx))
	}
	if werr != nil {
		return Result{}, werr
	}
	res := Result{Holder: d.Holder, Verdict: d.Verdict, Action: ActionYield}
	if cm == nil {
		res.Verdict, res.Action, res.Recreated = VerdictLost, ActionRecreate, true
		l.event(a.clusterObj, corev1.EventTypeWarning, EventLockRecreated, "Recreated lost init lock %s for its granted holder %s; %s was refused", a.lockName, d.Holder, a.m.Name)
	} else {
		l.event(a.clusterObj, corev1.EventTypeWarning, EventLockRecreated, "Init lock handed to its granted holder %s; %s was refused", d.Holder, a.m.Name)
	}
	return res, nil
}

// withdraw removes the caller's grant record.
func (a *acquisition) withdraw(ctx context.Context) error {
	dropGrant(a.machineObj)
	return a.l.clearGrant(ctx, a.m, a.cl.Name)
}

func (a *acquisition) acquired(action Action) {
	l, m := a.l, a.m
	switch action {
	case ActionCreate:
		l.event(a.clusterObj, corev1.EventTypeNormal, EventLockAcquired, "Machine %s acquired the init lock", m.Name)
	case ActionTakeOver:
		l.event(a.clusterObj, corev1.EventTypeNormal, EventLockTakenOver, "Machine %s took over the init lock from a machine that no longer exists", m.Name)
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

// Unlock releases cluster's lock held by machine: it withdraws machine's
// grant record, then deletes the lock with the UID and resourceVersion it
// read as preconditions. A missing lock is success. Unlock never deletes a
// ConfigMap that is not a lock (ErrNotALock), a lock it cannot read
// (ErrCorruptLock, unless AnyHolder) or a lock another Machine holds
// (ErrNotHolder, unless AnyHolder).
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
		cm, err := l.getLock(ctx, cl.Namespace, lockName)
		if err != nil {
			return err
		}
		if cm == nil {
			if m == nil {
				return nil
			}
			dropGrant(machine)
			return l.clearGrant(ctx, *m, cl.Name)
		}
		if o.uid != "" && (cm.UID != o.uid || cm.ResourceVersion != o.resourceVersion) {
			return apierrors.NewConflict(corev1.Resource("configmaps"), lockName,
				fmt.Errorf("lock %s/%s changed since it was inspected; look at it again", cl.Namespace, lockName))
		}
		lk := ObserveLock(cm, cl.Name)
		holder := lk.Record.MachineName
		switch {
		case lk.Problem != nil && (errors.Is(lk.Problem, ErrNotALock) || !o.anyHolder):
			return lockError(cl.Namespace, lockName, lk.Problem)
		case lk.Problem == nil && !o.anyHolder && holder != m.Name:
			return &Error{Namespace: cl.Namespace, Name: lockName, Kind: "configmap", Err: ErrNotHolder,
				Detail: fmt.Sprintf("it is held by %s, not %s; use AnyHolder to release it anyway", holder, m.Name)}
		}
		// Withdraw the grant first: should the delete then fail, the lock
		// still names its holder, and nothing is granted twice.
		if holder != "" {
			target := Machine{Namespace: cl.Namespace, Name: holder, APIVersion: cl.APIVersion}
			if m != nil && m.Name == holder {
				target = *m
			}
			if err := l.clearGrant(ctx, target, cl.Name); err != nil {
				return err
			}
			if m != nil && m.Name == holder {
				dropGrant(machine)
			}
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

// observe reads the lock and, when another Machine holds it, that Machine,
// both live. When grants is given and the holder carries a grant, the
// holder is taken from the grants rather than read again.
func (l *Locker) observe(ctx context.Context, cl Cluster, m Machine, lockName string, grants func() ([]Machine, error)) (Observation, *corev1.ConfigMap, error) {
	obs := Observation{ClusterName: cl.Name, Cluster: &cl, Caller: &m}
	cm, err := l.getLock(ctx, cl.Namespace, lockName)
	if err != nil || cm == nil {
		return obs, nil, err
	}
	obs.Lock = ObserveLock(cm, cl.Name)
	if obs.Lock.Problem != nil {
		return obs, cm, nil
	}
	holder := obs.Lock.Record.MachineName
	if holder == m.Name {
		obs.Holder = &m
		return obs, cm, nil
	}
	if grants != nil {
		gs, err := grants()
		if err != nil {
			return obs, nil, err
		}
		for i := range gs {
			if gs[i].Name == holder {
				obs.Holder = &gs[i]
				return obs, cm, nil
			}
		}
	}
	h, err := l.getMachine(ctx, cl.Namespace, holder, m.APIVersion)
	if err != nil {
		return obs, nil, err
	}
	obs.Holder = h
	return obs, cm, nil
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

// listGrants lists, live, the Machines of the cluster that carry a grant
// record for it.
// With notOlderThan, a resourceVersion, the list reflects at least the
// state at that version ("0": any state the API server has); without it, it
// is a consistent read.
func (l *Locker) listGrants(ctx context.Context, cl Cluster, apiVersion, notOlderThan string) ([]Machine, error) {
	list := &metav1.PartialObjectMetadataList{}
	gvk := machineGVK(apiVersion)
	list.SetGroupVersionKind(gvk.GroupVersion().WithKind(gvk.Kind + "List"))
	opts := []client.ListOption{client.InNamespace(cl.Namespace), client.MatchingLabels{capi.ClusterNameLabel: cl.Name}}
	switch notOlderThan {
	case "":
	case "0":
		opts = append(opts, &client.ListOptions{Raw: &metav1.ListOptions{ResourceVersion: "0"}})
	default:
		opts = append(opts, &client.ListOptions{Raw: &metav1.ListOptions{
			ResourceVersion: notOlderThan, ResourceVersionMatch: metav1.ResourceVersionMatchNotOlderThan}})
	}
	if err := l.reader.List(ctx, list, opts...); err != nil {
		return nil, fmt.Errorf("listing machines of cluster %s/%s for grant records: %w", cl.Namespace, cl.Name, err)
	}
	return GrantsIn(list.Items, cl.Name), nil
}

// GrantsIn returns the Machines among items that carry a grant record for
// cluster.
func GrantsIn(items []metav1.PartialObjectMetadata, cluster string) []Machine {
	var out []Machine
	for i := range items {
		g := grantFrom(items[i].Annotations)
		if !g.For(cluster) {
			continue
		}
		out = append(out, Machine{Namespace: items[i].Namespace, Name: items[i].Name, UID: items[i].UID, Grant: g,
			APIVersion: items[i].APIVersion})
	}
	return out
}

func machineGVK(apiVersion string) schema.GroupVersionKind {
	gv, err := schema.ParseGroupVersion(apiVersion)
	if err != nil || gv.Version == "" {
		return capi.MachineGVK(capi.V1Beta2)
	}
	return gv.WithKind(capi.MachineKind)
}

func hasMachine(ms []Machine, name string) bool {
	for _, m := range ms {
		if m.Name == name {
			return true
		}
	}
	return false
}

func holderUID(grants []Machine, name string) types.UID {
	for _, g := range grants {
		if g.Name == name {
			return g.UID
		}
	}
	return ""
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
