package chaos

import (
	"context"
	"fmt"
	"math/rand/v2"
	"sync"
	"time"

	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/initlock/initlock/internal/capi"
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
		r.c.LockLost("driver", name)
		err = r.deleteLock(ctx, name, "operator deleted the lock")
	case ActStaleOwner:
		r.c.LockLost("driver", name)
		err = r.staleOwner(ctx, name)
	case ActPause:
		if err = r.setPaused(ctx, name, true); err == nil {
			sleep(ctx, a.Delay)
			err = r.setPaused(ctx, name, false)
		}
	case ActReplaceMachine:
		m := crt.plan.Machines[a.Machine%len(crt.plan.Machines)]
		if err = r.deleteMachines(ctx, name, []string{m}); err == nil {
			sleep(ctx, a.Delay)
			err = r.admin.Create(ctx, kubeenv.NewMachine(capi.V1Beta2, r.ns, name, m))
			r.h.Add("driver", "machine created", m, "", "a new machine with the old name")
		}
	case ActDecommission:
		gone = true
		err = r.deleteCluster(ctx, name)
	case ActRestore:
		gone, err = r.restore(ctx, crt, a.Restore)
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
