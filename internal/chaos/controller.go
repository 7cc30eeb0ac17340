package chaos

import (
	"context"
	"errors"
	"math/rand/v2"
	"sync"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/initlock/initlock/pkg/initlock"
)

// controller is a simulated bootstrap provider: it reconciles random
// control-plane Machines of the uninitialised Clusters and calls Lock for
// them; a Machine that acquires the lock runs "kubeadm init" for a while,
// then either initialises its Cluster or fails and calls Unlock.
type controller struct {
	r      *runner
	name   string
	client client.Client
	locker *initlock.Locker
	rnd    *rand.Rand
}

// call is one reconcile of a Machine, with the random draws made for it.
type call struct {
	cluster, machine string
	// cutOff above zero ends the Lock call after that time.
	cutOff time.Duration
	// hold is how long the init runs, success whether it succeeds.
	hold    time.Duration
	success bool
	// cachedLock and cachedUnlock make the Lock call, and the Unlock call
	// of a failed init, with objects read from the informer cache.
	cachedLock, cachedUnlock bool
}

// loop reconciles until actCtx ends; inits it starts run under ctx.
func (bc *controller) loop(actCtx, ctx context.Context) {
	r := bc.r
	for sleep(actCtx, time.Duration(10+bc.rnd.IntN(50))*time.Millisecond) {
		crt := r.clusters[bc.rnd.IntN(len(r.clusters))]
		k := call{cluster: crt.plan.Name, machine: crt.plan.Machines[bc.rnd.IntN(len(crt.plan.Machines))]}
		k.hold = r.p.MinHold + time.Duration(bc.rnd.Int64N(int64(r.p.MaxHold-r.p.MinHold)+1))
		k.success = bc.rnd.Float64() < r.p.InitSuccess
		k.cachedLock = bc.rnd.Float64() < r.p.StaleViews
		k.cachedUnlock = bc.rnd.Float64() < r.p.StaleViews
		if crt.isGone() || r.c.Initialized(k.cluster) {
			continue
		}
		if _, running := r.running.Load(k.machine); running && bc.rnd.IntN(3) != 0 {
			continue // re-Lock the holder now and then only
		}
		if bc.rnd.Float64() < r.p.Interrupt {
			k.cutOff = time.Duration(bc.rnd.Int64N(int64(r.p.InterruptWithin) + 1))
		}
		mu := r.serialFor(k.machine)
		if !mu.TryLock() {
			continue // another controller reconciles it
		}
		bc.reconcile(actCtx, ctx, k)
		mu.Unlock()
	}
}

// reconcile calls Lock for the machine and records the result. The caller
// holds the machine's serial mutex, so that the result is recorded before
// the machine's init can give the lock up.
func (bc *controller) reconcile(actCtx, ctx context.Context, k call) {
	r := bc.r
	res, epoch, in, err := bc.lock(actCtx, k)
	switch {
	case errors.Is(err, errSkipped):
	case err != nil:
		r.c.LockError(bc.name, k.machine, err)
	case res.Acquired:
		r.c.Acquired(bc.name, k.cluster, k.machine, epoch, in)
		if r.c.Holder(k.cluster) == k.machine && r.startInit(k.machine) {
			r.agents.Add(1)
			go func() {
				defer r.agents.Done()
				defer r.running.Delete(k.machine)
				bc.init(ctx, k)
			}()
		}
	default:
		r.c.Refused(bc.name, k.machine, res.Holder, res.Recreated)
	}
}

var errSkipped = errors.New("skipped")

// lock reads the Cluster and the Machine and calls Lock with them.
func (bc *controller) lock(ctx context.Context, k call) (initlock.Result, int, Incarnation, error) {
	// Take the epoch before reading the Machine: a deletion after the read
	// makes any acquisition by this call void.
	epoch := bc.r.c.Epoch(k.machine)
	c, m, err := bc.get(ctx, k.cluster, k.machine, k.cachedLock)
	if err != nil {
		return initlock.Result{}, epoch, Incarnation{}, errSkipped
	}
	in := Incarnation{Cluster: c.GetUID(), Machine: m.GetUID()}
	bc.r.c.LockCall()
	if k.cutOff > 0 {
		bc.r.mu.Lock()
		bc.r.res.CutOff++
		bc.r.mu.Unlock()
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeoutCause(ctx, k.cutOff, errCutOff)
		defer cancel()
	}
	res, err := bc.locker.Lock(WithCaller(WithOp(ctx, opLock), k.machine), c, m)
	return res, epoch, in, err
}

// errCutOff is the cause of a Lock call cut off on purpose.
var errCutOff = errors.New("lock call cut off by the chaos runner")

// get reads the Cluster and the Machine live through the controller's
// (faulty) client or, when cached, from the informer cache, which lags.
func (bc *controller) get(ctx context.Context, cluster, machine string, cached bool) (*unstructured.Unstructured, *unstructured.Unstructured, error) {
	var rd client.Reader = bc.client
	if cached {
		rd = bc.r.cache
	}
	c := bc.r.clusterObject(cluster)
	if err := rd.Get(ctx, client.ObjectKeyFromObject(c), c); err != nil {
		return nil, nil, err
	}
	m := bc.r.machineObject(machine)
	if err := rd.Get(ctx, client.ObjectKeyFromObject(m), m); err != nil {
		return nil, nil, err
	}
	if cached {
		bc.r.c.StaleView(cluster, revision(c), machine, revision(m))
	}
	return c, m, nil
}

// init runs kubeadm init on machine for hold, then initialises the cluster
// or, when init fails, calls Unlock until it succeeds.
func (bc *controller) init(ctx context.Context, k call) {
	r := bc.r
	cluster, machine := k.cluster, k.machine
	actor := "init/" + machine
	if !sleep(ctx, k.hold) {
		return
	}
	if k.success {
		if r.c.FinishInit(actor, cluster, machine) {
			if err := r.setStatusInitialized(ctx, cluster); err != nil {
				r.fail(err)
			}
		}
		return
	}
	mu := r.serialFor(machine)
	mu.Lock()
	defer mu.Unlock()
	if !r.c.Unlocking(actor, cluster, machine) {
		return
	}
	cached := k.cachedUnlock
	for range 30 {
		c, m, err := bc.get(ctx, cluster, machine, cached)
		if apierrors.IsNotFound(err) && cached {
			cached = false // the cache may not have it yet: requeue, read live
			continue
		}
		if apierrors.IsNotFound(err) {
			r.h.Add(actor, "unlock skipped", machine, "", "the cluster or the machine is gone")
			return
		}
		if err == nil {
			err = bc.locker.Unlock(WithCaller(WithOp(ctx, opUnlock), machine), c, m)
			if err == nil {
				r.h.Add(actor, "unlocked", machine, "", "")
				return
			}
			if errors.Is(err, initlock.ErrNotHolder) {
				r.h.Add(actor, "unlock: not the holder", machine, "", oneLine(err))
				return
			}
			r.c.UnlockError(actor, machine, err)
		}
		if !sleep(ctx, 50*time.Millisecond) {
			return
		}
	}
	r.fail(errors.New("Unlock of " + machine + " failed 30 times"))
}

// serialFor returns the mutex that serialises machine's Lock and Unlock
// calls.
func (r *runner) serialFor(machine string) *sync.Mutex {
	mu, _ := r.serial.LoadOrStore(machine, &sync.Mutex{})
	return mu.(*sync.Mutex)
}

// startInit marks machine as running init; false when it already does.
func (r *runner) startInit(machine string) bool {
	_, running := r.running.LoadOrStore(machine, true)
	return !running
}
