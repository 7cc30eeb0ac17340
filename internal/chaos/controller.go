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

// loop reconciles until actCtx ends; inits it starts run under ctx.
func (bc *controller) loop(actCtx, ctx context.Context) {
	r := bc.r
	for sleep(actCtx, time.Duration(10+bc.rnd.IntN(50))*time.Millisecond) {
		crt := r.clusters[bc.rnd.IntN(len(r.clusters))]
		cluster := crt.plan.Name
		machine := crt.plan.Machines[bc.rnd.IntN(len(crt.plan.Machines))]
		hold := bc.r.p.MinHold + time.Duration(bc.rnd.Int64N(int64(bc.r.p.MaxHold-bc.r.p.MinHold)+1))
		success := bc.rnd.Float64() < bc.r.p.InitSuccess
		if crt.isGone() || r.c.Initialised(cluster) {
			continue
		}
		if r.isRunning(machine) && bc.rnd.IntN(3) != 0 {
			continue // re-Lock the holder now and then only
		}
		var cutOff time.Duration
		if bc.rnd.Float64() < r.p.Interrupt {
			cutOff = time.Duration(bc.rnd.Int64N(int64(r.p.InterruptWithin) + 1))
		}
		mu := r.serialFor(machine)
		if !mu.TryLock() {
			continue // another controller reconciles it
		}
		bc.reconcile(actCtx, ctx, cluster, machine, cutOff, hold, success)
		mu.Unlock()
	}
}

// reconcile calls Lock for machine and records the result. The caller
// holds machine's serial mutex, so that the result is recorded before the
// machine's init can give the lock up.
func (bc *controller) reconcile(actCtx, ctx context.Context, cluster, machine string, cutOff, hold time.Duration, success bool) {
	r := bc.r
	res, epoch, err := bc.lock(actCtx, cluster, machine, cutOff)
	switch {
	case errors.Is(err, errSkipped):
	case err != nil:
		r.c.LockError(bc.name, machine, err)
	case res.Acquired:
		r.c.Acquired(bc.name, cluster, machine, epoch)
		if r.c.Holder(cluster) == machine && r.startInit(machine) {
			r.agents.Add(1)
			go func() {
				defer r.agents.Done()
				defer r.endInit(machine)
				bc.init(ctx, cluster, machine, hold, success)
			}()
		}
	default:
		r.c.Refused(bc.name, machine, res.Holder, res.Recreated)
	}
}

var errSkipped = errors.New("skipped")

// lock reads the Cluster and the Machine and calls Lock.
// A cutOff above zero ends the Lock call after that time, wherever it is.
func (bc *controller) lock(ctx context.Context, cluster, machine string, cutOff time.Duration) (initlock.Result, int, error) {
	// Take the epoch before reading the Machine: a deletion after the read
	// makes any acquisition by this call void.
	epoch := bc.r.c.Epoch(machine)
	c, m, err := bc.get(ctx, cluster, machine)
	if err != nil {
		return initlock.Result{}, epoch, errSkipped
	}
	bc.r.c.LockCall()
	if cutOff > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeoutCause(ctx, cutOff, errCutOff)
		defer cancel()
	}
	res, err := bc.locker.Lock(WithOp(ctx, opLock), c, m)
	return res, epoch, err
}

// errCutOff is the cause of a Lock call cut off on purpose.
var errCutOff = errors.New("lock call cut off by the chaos runner")

// get reads the Cluster and the Machine live through the controller's
// (faulty) client.
func (bc *controller) get(ctx context.Context, cluster, machine string) (*unstructured.Unstructured, *unstructured.Unstructured, error) {
	c := bc.r.clusterObject(cluster)
	if err := bc.client.Get(ctx, client.ObjectKeyFromObject(c), c); err != nil {
		return nil, nil, err
	}
	m := bc.r.machineObject(machine)
	if err := bc.client.Get(ctx, client.ObjectKeyFromObject(m), m); err != nil {
		return nil, nil, err
	}
	return c, m, nil
}

// init runs kubeadm init on machine for hold, then initialises the cluster
// or, when init fails, calls Unlock until it succeeds.
func (bc *controller) init(ctx context.Context, cluster, machine string, hold time.Duration, success bool) {
	r := bc.r
	actor := "init/" + machine
	if !sleep(ctx, hold) {
		return
	}
	if success {
		if r.c.FinishInit(actor, cluster, machine) {
			if err := r.setStatusInitialised(ctx, cluster); err != nil {
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
	for range 30 {
		c, m, err := bc.get(ctx, cluster, machine)
		if apierrors.IsNotFound(err) {
			r.h.Add(actor, "unlock skipped", machine, "", "the cluster or the machine is gone")
			return
		}
		if err == nil {
			err = bc.locker.Unlock(WithOp(ctx, opUnlock), c, m)
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
	r.mu.Lock()
	defer r.mu.Unlock()
	mu, ok := r.serial[machine]
	if !ok {
		mu = &sync.Mutex{}
		r.serial[machine] = mu
	}
	return mu
}

// startInit marks machine as running init; false when it already does.
func (r *runner) startInit(machine string) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.running[machine] {
		return false
	}
	r.running[machine] = true
	return true
}

func (r *runner) endInit(machine string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	delete(r.running, machine)
}

func (r *runner) isRunning(machine string) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.running[machine]
}
