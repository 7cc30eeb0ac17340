package explore

import (
	"context"
	"fmt"
	"runtime/debug"
	"slices"
	"testing/synctest"

	"github.com/initlock/initlock/internal/kubeenv/faults"
)

// Reduction names a reduction of the search that a scenario may turn off,
// to measure it or to check it against the search without it.
type Reduction uint

const (
	// SleepSets means a choice independent of the steps taken since a sibling
	// explored it is not explored again (sleep.go).
	SleepSets Reduction = 1 << iota
	// Symmetry means states that differ only by a permutation of interchangeable
	// Machines' names are one state (symmetry.go).
	Symmetry
	// Forget means the digest forgets what an actor was told once its future no
	// longer depends on it (a finished actor, a provider between attempts).
	Forget
)

type explorer struct {
	sc Scenario
	// visited is, per state digest, the choices explored from it and the
	// smallest step at which each was.
	visited map[stateKey][]explored
	stack   []task
	res     Result
	bound   int
	// initial is the starting state, copied into every execution.
	initial *System
	// reached, when set, is told of every state the search reaches (and
	// does not cut at the step bound), for tests.
	reached func(s *System, key stateKey, step int)
	// violations, when set, collects the shortest length of every
	// invariant's violations instead of bounding the search by the first.
	violations map[string]int
}

// task is an execution to run: path is the choices from the start, the
// last of them choice k of node from (nil for the first execution).
type task struct {
	path []int
	from *node
	k    int
}

// Explore runs every interleaving of sc's actors, faults and events up to
// its bounds, depth first, pruning states already expanded at a depth no
// greater, and returns the shortest violation found. It must run inside a
// testing/synctest bubble: synctest.Wait tells when every goroutine of the
// code under test is blocked on the model, so that each step is one
// scheduler choice and every execution is replayed exactly.
func Explore(sc Scenario) Result {
	return newExplorer(sc).run()
}

func newExplorer(sc Scenario) *explorer {
	return &explorer{sc: sc, visited: map[stateKey][]explored{}, res: Result{Scenario: sc.Name, Faults: faults.Tally{}}, bound: sc.MaxSteps}
}

func (x *explorer) run() Result {
	sc := x.sc
	// The code under test allocates much and keeps little.
	defer debug.SetGCPercent(debug.SetGCPercent(800))
	x.initial = newSystem(&x.sc, nil)
	for _, k := range sc.Before {
		x.res.Faults[eventClasses[k]]++
	}
	x.stack = []task{{}}
	for len(x.stack) > 0 {
		select {
		case <-sc.Stop:
			x.res.Stopped = true
			return x.res
		default:
		}
		t := x.stack[len(x.stack)-1]
		x.stack = x.stack[:len(x.stack)-1]
		if len(t.path) > x.bound {
			continue
		}
		x.execute(t)
	}
	return x.res
}

// execute runs the code along t's path, then on along the first choice to
// explore of every new state, pushing the others.
func (x *explorer) execute(t task) {
	x.res.Executions++
	s := newSystem(&x.sc, x.initial)
	ctx := context.Background()
	for _, p := range x.sc.Providers {
		s.actorStarted(p.actor())
		if p.Upstream {
			go s.upstreamProvider(ctx, p)
		} else {
			go s.provider(ctx, p)
		}
	}
	if x.sc.Reconciles > 0 {
		s.actorStarted("manager")
		go s.manager(ctx)
	}
	if x.sc.Operator {
		s.actorStarted("operator")
		go s.operator(ctx)
	}
	if len(x.sc.Relink) > 0 {
		s.actorStarted(relinkerActor)
		go s.relinker(ctx)
	}
	path := slices.Clone(t.path)
	defer func() {
		s.abort()
		synctest.Wait()
	}()
	// taken is the choice of an expanded node just taken, whose footprint
	// is known once the actor it released has run on.
	var (
		sleep    []sleeper
		taken    *node
		takenK   int
		takenFP  footprint
		lastPath = len(path) - 1
	)
	for step := 0; ; step++ {
		synctest.Wait()
		if taken != nil {
			s.mu.Lock()
			fp := takenFP.union(s.stepFP)
			s.mu.Unlock()
			taken.fps[takenK], taken.known[takenK] = fp, true
			if x.sc.Off&SleepSets == 0 {
				sleep = taken.childSleep(takenK, fp)
			}
			taken = nil
		}
		if v := s.checker.violation; v != nil {
			x.found(*v, s.trace)
			return
		}
		opts := s.options()
		if len(opts) == 0 {
			if s.protection(ctx); s.checker.violation == nil {
				s.liveness(ctx)
			}
			if s.checker.violation != nil {
				x.found(*s.checker.violation, append(s.trace, "every actor is done: "+s.checker.violation.Detail))
			}
			if s.checker.operatorNeeded {
				x.res.OperatorNeeded++
			}
			return
		}
		switch {
		case step >= len(path):
			n, first := x.expand(s, opts, step, sleep, path)
			if n == nil {
				return
			}
			path = append(path, first)
			taken, takenK = n, 0
		case step == lastPath && t.from != nil:
			taken, takenK = t.from, t.k
		}
		if path[step] >= len(opts) {
			panic(fmt.Sprintf("explore: replay diverged at step %d: %d options, choice %d", step, len(opts), path[step]))
		}
		c := opts[path[step]]
		if taken != nil {
			takenFP = s.footprintOf(c)
		}
		s.mu.Lock()
		s.stepFP = footprint{}
		s.mu.Unlock()
		s.trace = append(s.trace, c.text)
		s.apply(c)
		if step+1 > x.res.Deepest {
			x.res.Deepest = step + 1
		}
	}
}

// expand decides which of the choices opts of a state reached at step,
// with sleep set sleep, to explore: those not asleep and not explored from
// the state (or a symmetric one) at a step no greater. It pushes a task
// for each but the first, which it returns with their node; a nil node
// when there is nothing to explore.
func (x *explorer) expand(s *System, opts []choice, step int, sleep []sleeper, path []int) (*node, int) {
	labels := s.labels(opts)
	awake := func(i int) bool { return !asleep(sleep, labels[i].concrete) }
	if step >= x.bound {
		for i := range opts {
			if awake(i) {
				x.res.Truncated++
				break
			}
		}
		return nil, 0
	}
	key, rename := s.digest()
	if x.reached != nil {
		x.reached(s, key, step)
	}
	prev, seen := x.visited[key]
	if !seen {
		x.res.States++
	}
	at := step
	if x.sc.AnyDepth {
		at = 0
	}
	done := slices.Clone(prev)
	var todo []int
	for i := range opts {
		canon := labelHash(rename(labels[i].text))
		labels[i].canon = canon
		if !awake(i) || exploredAt(done, canon) <= at {
			continue
		}
		todo = append(todo, i)
		done = setExplored(done, canon, at)
	}
	x.visited[key] = done
	if len(todo) == 0 {
		return nil, 0
	}
	n := &node{
		labels: make([]uint64, len(todo)),
		fps:    make([]footprint, len(todo)),
		known:  make([]bool, len(todo)),
		sleep:  s.keepAsleep(sleep, prev, at, rename),
	}
	for j, i := range todo {
		n.labels[j] = labels[i].concrete
		if c := opts[i].class; c != "" {
			x.res.Faults[c]++
		}
	}
	for j := len(todo) - 1; j >= 1; j-- {
		x.stack = append(x.stack, task{path: append(slices.Clone(path[:step]), todo[j]), from: n, k: j})
	}
	return n, todo[0]
}

// found keeps the shortest violation and bounds the rest of the search to
// shorter ones.
func (x *explorer) found(v Violation, trace []string) {
	if x.violations != nil {
		if n, ok := x.violations[v.Invariant]; !ok || len(trace) < n {
			x.violations[v.Invariant] = len(trace)
		}
		return
	}
	if x.res.Violation == nil || len(trace) < len(x.res.Violation.Steps) {
		x.res.Violation = &Counterexample{Violation: v, Steps: slices.Clone(trace)}
		x.bound = len(trace) - 1
	}
}
