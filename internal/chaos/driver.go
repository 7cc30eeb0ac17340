package chaos

import (
	"context"
	"fmt"
	"math/rand/v2"
	"sync"
	"time"

	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/initlock/initlock/internal/kubeenv"
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

// act does one action.
func (r *runner) act(ctx context.Context, a Action) {
	if a.Kind == ActKill {
		reps := r.fleet.Replicas()
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
	case ActDeleteLock:
		err = r.deleteLock(ctx, name, "operator deleted the lock")
	case ActHoldDeletion:
		err = r.holdDeletion(ctx, name, a.Delay)
	case ActStaleOwner:
		err = r.staleOwner(ctx, name)
	case ActPause:
		if err = r.setPaused(ctx, name, true); err == nil {
			sleep(ctx, a.Delay)
			err = r.setPaused(ctx, name, false)
		}
	case ActReplaceMachine:
		m := crt.plan.Machines[a.Machine%len(crt.plan.Machines)]
		if a.Held {
			m = r.replaceTarget(crt, a.Machine)
		}
		r.hit(a.Kind, r.machineState(name, m))
		err = r.replaceMachine(ctx, name, m, a.Delay)
	case ActOldBackup:
		r.hit(a.Kind, map[bool]string{true: "copy made at setup", false: "older copy"}[a.FromSetup])
		err = r.restoreOld(ctx, name, a.Delay, a.FromSetup)
	case ActDecommission:
		gone = true
		err = r.deleteCluster(ctx, name)
	case ActRestore:
		gone, err = r.restore(ctx, crt, a.Restore)
	case ActPartialRestore:
		err = r.partialRestore(ctx, crt)
	case ActLeaveMark:
		err = r.leaveMark(ctx, name, a.Move)
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
	if holder == "" || n%2 == 0 {
		if holder != "" {
			return holder
		}
		return ms[n%len(ms)]
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

// hit counts what an action found at its target.
func (r *runner) hit(k ActionKind, what string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.res.Hits[string(k)+" "+what]++
}

func (r *runner) count(k ActionKind) {
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
