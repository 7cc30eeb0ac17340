package chaos

import (
	"context"
	"fmt"
	"math/rand/v2"
	"sync"
	"time"

	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/initlock/initlock/internal/kubeenv"
	"github.com/initlock/initlock/internal/kubeenv/faults"
	"github.com/initlock/initlock/pkg/initlock"
)

type clusterRT struct {
	plan ClusterPlan
	mu   sync.Mutex
	busy bool
	gone bool
}

// acquire marks the cluster busy for a driver action; false when it is
// busy or gone.
func (c *clusterRT) acquire() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.busy || c.gone {
		return false
	}
	c.busy = true
	return true
}

func (c *clusterRT) release(gone bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.busy = false
	c.gone = c.gone || gone
}

func (c *clusterRT) isGone() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.gone
}

// activity runs the bootstrap controllers and the driver for the plan's
// activity time, then waits for every init and driver action to end.
func (r *runner) activity(ctx context.Context) {
	actCtx, cancel := context.WithTimeout(ctx, r.p.Activity)
	defer cancel()
	var wg sync.WaitGroup
	for i := range r.p.Controllers {
		name := fmt.Sprintf("bc-%d", i+1)
		cfg, inj := WrapConfig(r.o.Config, name, r.p.Seed*31+uint64(i), r.c.Deleted)
		inj.SetFaults(r.p.ClientFaults)
		inj.OnLateWrite(r.lateWrite)
		r.injectors = append(r.injectors, inj)
		cl, err := client.New(cfg, client.Options{Scheme: kubeenv.Scheme(), Mapper: r.admin.RESTMapper()})
		if err != nil {
			r.fail(err)
			continue
		}
		bc := &controller{r: r, name: name, client: cl, locker: initlock.New(cl),
			rnd: rand.New(rand.NewPCG(r.p.Seed, uint64(100+i)))}
		wg.Add(1)
		go func() {
			defer wg.Done()
			bc.loop(actCtx, ctx)
		}()
	}
	r.drive(actCtx, ctx)
	wg.Wait()
	r.actions.Wait()
	r.agents.Wait()
}

// drive runs the plan's actions at their times; long actions run on in
// their own goroutines, under ctx, after actCtx ends.
func (r *runner) drive(actCtx, ctx context.Context) {
	start := time.Now()
	for _, a := range r.p.Actions {
		if !sleep(actCtx, time.Until(start.Add(a.At))) {
			return
		}
		r.actions.Add(1)
		go func() {
			defer r.actions.Done()
			r.act(ctx, a)
		}()
	}
	<-actCtx.Done()
}

// driverClasses are the fault classes of the catalogue
// (internal/kubeenv/faults) the driver injects, one case of act each; an
// Action's Kind is one of them.
var driverClasses = []faults.Class{
	faults.ManagerKilled,
	faults.LockDeleted,
	faults.LockDeletionHeld,
	faults.LockCollected,
	faults.Pause,
	faults.MachineRecreated,
	faults.ClusterRestoredOld,
	faults.BackupRestore,
	faults.ClusterDeleted,
	faults.SameNameOwner,
	faults.MarkLeft,
}

// act does one action: it injects the fault class a.Kind.
func (r *runner) act(ctx context.Context, a Action) {
	// faults.ManagerKilled sends SIGKILL to a manager replica, restarted
	// after Delay.
	if a.Kind == faults.ManagerKilled {
		reps := r.fleet.replicas
		rep := reps[a.Replica%len(reps)]
		if r.fleet.Kill(rep, a.Delay) {
			r.count(a.Kind)
		} else {
			r.skip(a)
		}
		return
	}
	crt := r.clusters[a.Cluster%len(r.clusters)]
	if a.Held {
		crt = r.heldCluster(ctx, a.Cluster, crt)
	}
	if !crt.acquire() {
		r.skip(a)
		return
	}
	gone := false
	defer func() { crt.release(gone) }()
	name := crt.plan.Name
	r.count(a.Kind)
	r.h.Addf("driver", "action", name, "%s", a)
	var err error
	switch a.Kind {
	case faults.LockDeleted:
		// Deletes a lock as an operator would with kubectl: the lock guard
		// refuses it unless the lock is marked for release.
		err = r.deleteLock(ctx, name, "operator deleted the lock")
	case faults.LockDeletionHeld:
		// Puts another controller's finalizer on a lock for Delay: a
		// release that deletes it meanwhile leaves it being deleted, held
		// back, until the finalizer goes.
		err = r.holdDeletion(ctx, name, a.Delay)
	case faults.LockCollected:
		// Points the lock's ownerReference at a Cluster UID that does not
		// exist, as a naive copy does: the garbage collector tries to
		// delete the lock, which the lock guard refuses.
		err = r.staleOwner(ctx, name)
	case faults.Pause:
		// Pauses a Cluster for Delay.
		if err = r.setPaused(ctx, name, true); err == nil {
			sleep(ctx, a.Delay)
			err = r.setPaused(ctx, name, false)
		}
	case faults.MachineRecreated:
		// Deletes a Machine and creates one with the same name (and a new
		// UID) after Delay. Held aims it at a Cluster whose lock is held:
		// an even Machine picks the holder, an odd one a Machine waiting
		// for the lock.
		m := crt.plan.Machines[a.Machine%len(crt.plan.Machines)]
		if a.Held {
			m = r.replaceTarget(crt, a.Machine)
		}
		r.hit(a.Kind, r.machineState(name, m))
		err = r.replaceMachine(ctx, name, m, a.Delay)
	case faults.ClusterRestoredOld:
		// Deletes a Cluster, and only the Cluster, and restores it
		// Velero-style from an older copy: the one setup created
		// (FromSetup: no grant register) or one read Delay before. Its UID
		// changes and its register goes back to what the copy holds.
		r.hit(a.Kind, map[bool]string{true: hitSetupCopy, false: hitOlderCopy}[a.FromSetup])
		err = r.restoreOld(ctx, name, a.Delay, a.FromSetup)
	case faults.ClusterDeleted:
		// Deletes a Cluster and its Machines for good.
		gone = true
		err = r.deleteCluster(ctx, name)
	case faults.BackupRestore:
		// Backs a Cluster up, loses it and restores it.
		gone, err = r.restore(ctx, crt, a.Restore)
	case faults.SameNameOwner:
		// Backs a Cluster up and loses it; an unrelated Cluster takes its
		// name; the backup is restored, Velero-style with initlock's
		// plugin, and the restore skips the Cluster (one of that name
		// exists): its Machines, its lock and its add-on ConfigMap come
		// back, and the relinker must not link the add-on to the unrelated
		// Cluster.
		err = r.partialRestore(ctx, crt)
	case faults.MarkLeft:
		// Leaves a release mark (or, Move, delete-for-move) on a held lock
		// and waits for the manager to take it off (leaveMark).
		err = r.leaveMark(ctx, name, a.Move)
	default:
		err = fmt.Errorf("the driver injects no fault class %s", a.Kind)
	}
	if err != nil {
		r.fail(fmt.Errorf("%s of cluster %s: %w", a.Kind, name, err))
	}
}

// heldCluster waits up to a second for a Cluster with two Machines or more
// whose lock one of them was granted, looking from index from on; it
// returns def when there is none.
func (r *runner) heldCluster(ctx context.Context, from int, def *clusterRT) *clusterRT {
	deadline := time.Now().Add(time.Second)
	for {
		for i := range r.clusters {
			c := r.clusters[(from+i)%len(r.clusters)]
			if len(c.plan.Machines) > 1 && r.c.Granted(c.plan.Name) != "" && !c.isGone() {
				return c
			}
		}
		if time.Now().After(deadline) || !sleep(ctx, 20*time.Millisecond) {
			return def
		}
	}
}

// replaceTarget picks the Machine of a Cluster to re-create: the holder
// for an even n, else a Machine waiting for the lock.
func (r *runner) replaceTarget(crt *clusterRT, n int) string {
	ms := crt.plan.Machines
	holder := r.c.Holder(crt.plan.Name)
	switch {
	case holder == "":
		return ms[n%len(ms)]
	case n%2 == 0:
		return holder
	}
	for i := range ms {
		if m := ms[(n+i)%len(ms)]; m != holder {
			return m
		}
	}
	return holder
}

// machineState tells whether a Machine holds its Cluster's lock, waits for
// it, or neither (its Cluster is initialised).
func (r *runner) machineState(cluster, machine string) string {
	switch {
	case r.c.Holder(cluster) == machine:
		return "holding"
	case r.c.Initialized(cluster):
		return "initialised"
	default:
		return "waiting"
	}
}

// What a faults.ClusterRestoredOld action restores the Cluster from.
const (
	hitSetupCopy = "copy made at setup"
	hitOlderCopy = "older copy"
)

// hitKey is the key of Result.Hits that counts what an action injecting
// class k found at its target.
func hitKey(k faults.Class, what string) string { return string(k) + " " + what }

// hit counts what an action found at its target.
func (r *runner) hit(k faults.Class, what string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.res.Hits[hitKey(k, what)]++
}

func (r *runner) count(k faults.Class) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.res.Actions[k]++
}

func (r *runner) skip(a Action) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.res.Skipped++
	r.h.Addf("driver", "action skipped", "", "%s: busy or gone", a)
}
