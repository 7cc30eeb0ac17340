package initlock

import (
	"context"
	"errors"
	"fmt"
	"time"

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

// maxAttempts bounds the read-decide-write rounds of one call.
const maxAttempts = 8

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

// WithClock sets the clock that stamps records; the default is the real
// one. Lock and Unlock never wait: a call that cannot be granted the lock
// returns at once.
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
	// RetryAfter, when the caller is refused without an error (another
	// Machine holds the lock, or won the race for it), is when to call
	// again: RetryAfterHeld, as the holder runs kubeadm init meanwhile and
	// a call sooner would be refused again. Zero when the lock is
	// acquired, or with an error.
	RetryAfter time.Duration
}

// RetryAfterHeld is Result.RetryAfter for a refused caller: the requeue
// interval the kubeadm bootstrap provider uses for the same answer of its
// own lock.
const RetryAfterHeld = 30 * time.Second

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
// who holds it, and when to call again. Lock never waits: a caller whose
// claim of a free lock loses the race is refused at once, with no other
// request than the claim and the read of its Machine, as the upstream lock
// refuses a caller whose create lost; it does not learn the winner's name.
// Errors wrap ErrClusterPaused, ErrClusterGone,
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
	res, err := a.lock(ctx)
	if err == nil && !res.Acquired {
		res.RetryAfter = RetryAfterHeld
	}
	return res, err
}

func (a *acquisition) lock(ctx context.Context) (Result, error) {
	if !a.cl.Initialized && !a.cl.Grant.Held() && !a.cl.Grant.Damaged() {
		if res, ok, err := a.free(ctx); ok || err != nil {
			return res, err
		}
	}
	return a.settle(ctx)
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
