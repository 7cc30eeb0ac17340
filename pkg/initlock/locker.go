package initlock

import (
	"context"
	"time"

	"k8s.io/client-go/tools/events"
	"k8s.io/utils/clock"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/initlock/initlock/pkg/initlock/internal/engine"
)

// Locker acquires and releases clusters' init locks. It is safe for
// concurrent use.
type Locker struct {
	env engine.Env
}

// Option configures a Locker (and a keeper's release, keeper.Release).
type Option func(*engine.Env)

// WithAPIReader makes the Locker read the lock, the Cluster and the
// Machines through r, which must read the API server directly (a
// manager's GetAPIReader), never a possibly stale cache. Without it the
// client passed to New must itself be uncached.
func WithAPIReader(r client.Reader) Option { return func(e *engine.Env) { e.Reader = r } }

// WithEventRecorder makes the Locker emit events on the Cluster, with the
// reasons LockAcquired (Normal: the caller was granted the lock),
// LockTakenOver (Normal: the caller took over a lock whose holder is
// gone), LockAdopted (Normal: a restored or moved lock is owned by the
// Cluster again), LockRecreated (Normal: a lost lock was written again for
// the Machine its grant names) and LockReleased (Normal).
func WithEventRecorder(r events.EventRecorder) Option { return func(e *engine.Env) { e.Recorder = r } }

// WithClock makes a Locker stamp what it records (an acquisition, the
// start of a release) with c's time instead of the real clock's.
func WithClock(c clock.PassiveClock) Option { return func(e *engine.Env) { e.Clock = c } }

// New returns a Locker that writes through c.
func New(c client.Client, opts ...Option) *Locker {
	l := &Locker{env: *engine.NewEnv(c)}
	for _, o := range opts {
		o(&l.env)
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
	// Verdict is what Lock found (for logs): "free", "healthy",
	// "stale-holder" and the others docs/design.md lists; empty when the
	// caller's claim of a free lock lost the race.
	Verdict string
	// Action is the change Lock made to the lock ConfigMap, for logs:
	// "none", "create", "recreate", "adopt", "take-over" or "yield",
	// including a write whose answer was lost and that Lock then found
	// applied; its event on the Cluster says the same.
	Action string
	// Recreated tells that the lock had been lost while granted and Lock
	// created it again, for Holder.
	Recreated bool
	// RetryAfter, when the caller is refused without an error (another
	// Machine holds the lock, or won the race for it), is when to call
	// again: 30 seconds, the requeue interval the kubeadm bootstrap
	// provider uses for the same answer of its own lock, as the holder
	// runs kubeadm init meanwhile and a call sooner would be refused
	// again. Zero when the lock is acquired, or with an error.
	RetryAfter time.Duration
}

// retryAfterHeld is Result.RetryAfter for a refused caller.
const retryAfterHeld = 30 * time.Second

// Lock tries to acquire cluster's init lock for machine. cluster is a
// Cluster API Cluster and machine a Machine of it, each typed (registered in
// the client's scheme), unstructured or, for machine, metadata-only. Both
// may come from a cache: Lock grants the lock only on what it reads live
// or on writes whose preconditions cover what it relies on. When Lock
// writes the Cluster's grant register and the cluster object passed was
// the Cluster as it stood before that write, Lock updates its annotations
// and resourceVersion to what the API server returned; otherwise it leaves
// the object untouched. Concurrent calls must not share one cluster object.
//
// A lock held by another existing Machine is not an error: the Result says
// who holds it, and when to call again. Lock never waits: a caller whose
// claim of a free lock loses the race is refused at once, as the upstream
// lock refuses a caller whose create lost, without learning the winner's
// name. Errors wrap ErrClusterPaused, ErrClusterGone, ErrStaleMachine,
// ErrNotALock, ErrCorruptLock, ErrInvalidName, ErrContended or an API error.
func (l *Locker) Lock(ctx context.Context, cluster, machine client.Object) (Result, error) {
	o, err := l.env.Lock(ctx, cluster, machine)
	res := Result{Acquired: o.Acquired, Holder: o.Holder, Verdict: string(o.Verdict), Action: string(o.Action), Recreated: o.Recreated}
	if err == nil && !res.Acquired {
		res.RetryAfter = retryAfterHeld
	}
	return res, err
}

// UnlockOption configures Unlock.
type UnlockOption func(*engine.UnlockParams)

// AnyHolder makes Unlock release the lock whoever holds it, and release a
// corrupt lock or a damaged register too; machine may then be nil. A
// provider's join path uses it once the control plane is initialised.
// Such a release is bound to what its first read found: should it try
// again (a race lost, an answer lost), it never releases a lock or a grant
// another call made meanwhile.
func AnyHolder() UnlockOption { return func(p *engine.UnlockParams) { p.AnyHolder = true } }

// Unlock releases cluster's lock held by machine: it empties the Cluster's
// grant register, then deletes the lock ConfigMap, each write conditional
// on what was read. It reads machine and the Cluster live and refuses
// objects that are not the live ones (ErrStaleMachine, ErrStaleCluster):
// an object from before a restore or a move never releases what the
// restored Machine holds. A missing lock and an empty register are
// success. Unlock never deletes a ConfigMap that is not a lock
// (ErrNotALock), a lock it cannot read (ErrCorruptLock, unless AnyHolder)
// or a lock another Machine holds (ErrNotHolder, unless AnyHolder), and
// starts nothing while the Cluster is paused (ErrClusterPaused): a pause
// that lands once the register's write is made does not stop the lock's
// release, whose preconditions bind the lock, not the Cluster.
func (l *Locker) Unlock(ctx context.Context, cluster, machine client.Object, opts ...UnlockOption) error {
	var p engine.UnlockParams
	for _, o := range opts {
		o(&p)
	}
	return l.env.Unlock(ctx, cluster, machine, p)
}

// Adopt makes cluster the owner of its existing init lock again, by UID,
// when the lock lost that ownerReference (a restore, a move) and a keeper
// would adopt it: the write of a keeper's adoption, confirmed on the
// Cluster read live and conditional on the lock as read. It writes nothing
// else: it never creates, grants, takes over or releases a lock, so a
// provider may call it for any Machine of the Cluster, such as the branch
// that restores a bootstrap config's status. Its patch also takes off the
// marks a keeper's adoption takes off (a release mark, an orphan's mark,
// clusterctl's delete-for-move). While the control plane is not
// initialised, a lock whose holder is gone and that no grant protects is
// left to the next Lock, which takes it over owned, or to a keeper. It
// tells whether it wrote the lock. Errors wrap
// ErrClusterPaused, ErrNotALock, ErrCorruptLock or an API error.
func (l *Locker) Adopt(ctx context.Context, cluster client.Object) (bool, error) {
	return l.env.Adopt(ctx, cluster)
}
