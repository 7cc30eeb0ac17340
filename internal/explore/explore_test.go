package explore_test

import (
	"cmp"
	"os"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/go-logr/logr"
	ctrl "sigs.k8s.io/controller-runtime"

	"github.com/initlock/initlock/internal/explore"
	"github.com/initlock/initlock/internal/kubeenv/faults"
)

func TestMain(m *testing.M) {
	ctrl.SetLogger(logr.Discard())
	m.Run()
}

// TestExplore runs the scenarios of make test; every one must be explored
// completely, without a counterexample, and together they must exercise
// every fault class of the catalogue (internal/kubeenv/faults) the
// explorer models.
func TestExplore(t *testing.T) {
	var (
		mu    sync.Mutex
		ran   int
		tally = faults.Tally{}
	)
	scs := explore.Scenarios()
	t.Cleanup(func() {
		if ran < len(scs) {
			return // some scenarios did not run (-run)
		}
		t.Logf("fault classes explored: %s", tally.Format(faults.Explorer))
		for _, c := range tally.Missing(faults.Explorer) {
			e, _ := faults.Lookup(c)
			t.Errorf("no scenario exercises fault class %s (%s): add one to explore.Scenarios", c, e.Meaning)
		}
	})
	for _, sc := range scs {
		t.Run(sc.Name, func(t *testing.T) {
			t.Parallel()
			res := explore1(t, sc)
			if res.Violation == nil && res.Truncated > 0 {
				t.Errorf("%d executions were cut at %d steps: raise MaxSteps so that the scenario is explored to its end", res.Truncated, sc.MaxSteps)
			}
			mu.Lock()
			defer mu.Unlock()
			ran++
			tally = tally.Add(res.Faults)
		})
	}
}

// TestExploreDeep runs the larger scenarios, with INITLOCK_EXPLORE_DEEP=1
// (make explore): first every execution up to 16 steps (a violation found
// there is a short one), then the whole scenario, with the state cache
// blind to depth (Scenario.AnyDepth), until it is explored to its end or
// its time budget runs out: Scenario.Budget, within which it must end, or
// else $INITLOCK_EXPLORE_BUDGET (15m by default). It logs which, with the
// states, executions and deepest step.
func TestExploreDeep(t *testing.T) {
	if os.Getenv("INITLOCK_EXPLORE_DEEP") == "" {
		t.Skip("set INITLOCK_EXPLORE_DEEP=1 (make explore) to run the deep scenarios")
	}
	budget := envBudget(t, 15*time.Minute)
	for _, sc := range explore.DeepScenarios() {
		t.Run(sc.Name, func(t *testing.T) {
			budget := cmp.Or(sc.Budget, budget)
			stop := make(chan struct{})
			timer := time.AfterFunc(budget, func() { close(stop) })
			defer timer.Stop()
			short := sc
			short.MaxSteps, short.Stop = min(16, sc.MaxSteps), stop
			if res := explore1(t, short); res.Violation != nil || res.Stopped || res.Truncated == 0 {
				logEnd(t, short, res, budget)
				return
			}
			whole := sc
			whole.AnyDepth, whole.Stop = true, stop
			logEnd(t, whole, explore1(t, whole), budget)
		})
	}
}

// envBudget is $INITLOCK_EXPLORE_BUDGET, def when it is not set.
func envBudget(t *testing.T, def time.Duration) time.Duration {
	v := os.Getenv("INITLOCK_EXPLORE_BUDGET")
	if v == "" {
		return def
	}
	d, err := time.ParseDuration(v)
	if err != nil {
		t.Fatalf("INITLOCK_EXPLORE_BUDGET=%q: %v", v, err)
	}
	return d
}

// logEnd says how far an exploration of TestExploreDeep went.
func logEnd(t *testing.T, sc explore.Scenario, res explore.Result, budget time.Duration) {
	switch {
	case res.Violation != nil:
	case res.Stopped && sc.Budget > 0:
		t.Errorf("%s: its budget of %s spent before the end: it must be explored to its end", sc.Name, budget)
	case res.Stopped:
		t.Logf("%s: budget %s spent before the end (incomplete)", sc.Name, budget)
	case res.Truncated == 0:
		t.Logf("%s: explored to its end (every execution complete within %d steps, the deepest %d)", sc.Name, sc.MaxSteps, res.Deepest)
	default:
		t.Errorf("%s: %d executions cut at the step bound %d: raise MaxSteps", sc.Name, res.Truncated, sc.MaxSteps)
	}
}

// explore1 explores sc in a synctest bubble, logs the result and fails the
// test on a counterexample.
func explore1(t *testing.T, sc explore.Scenario) explore.Result {
	var res explore.Result
	start := time.Now()
	synctest.Test(t, func(t *testing.T) {
		res = explore.Explore(sc)
	})
	t.Logf("%s, in %s", res, time.Since(start).Round(time.Millisecond))
	if res.Violation != nil {
		t.Errorf("counterexample: %s", res.Violation)
	}
	return res
}
