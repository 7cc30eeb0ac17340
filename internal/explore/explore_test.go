package explore_test

import (
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
// (make explore), by iterative deepening: every execution up to 16 steps,
// then 24, and so on, until the scenario is explored to its end or its time
// budget ($INITLOCK_EXPLORE_BUDGET, 15m by default) runs out. It logs the
// deepest step bound explored completely, and the states it took.
func TestExploreDeep(t *testing.T) {
	if os.Getenv("INITLOCK_EXPLORE_DEEP") == "" {
		t.Skip("set INITLOCK_EXPLORE_DEEP=1 (make explore) to run the deep scenarios")
	}
	budget := 15 * time.Minute
	if v := os.Getenv("INITLOCK_EXPLORE_BUDGET"); v != "" {
		var err error
		if budget, err = time.ParseDuration(v); err != nil {
			t.Fatalf("INITLOCK_EXPLORE_BUDGET=%q: %v", v, err)
		}
	}
	for _, sc := range explore.DeepScenarios() {
		t.Run(sc.Name, func(t *testing.T) {
			stop := make(chan struct{})
			timer := time.AfterFunc(budget, func() { close(stop) })
			defer timer.Stop()
			limit := sc.MaxSteps
			for depth := 16; ; depth += 8 {
				level := sc
				level.MaxSteps, level.Stop = min(depth, limit), stop
				res := explore1(t, level)
				switch {
				case res.Violation != nil:
					return
				case res.Stopped:
					t.Logf("%s: budget %s spent at step bound %d", sc.Name, budget, level.MaxSteps)
					return
				case res.Truncated == 0:
					t.Logf("%s: explored to its end (every execution complete within %d steps)", sc.Name, level.MaxSteps)
					return
				case level.MaxSteps >= limit:
					t.Logf("%s: every execution explored up to its step bound %d", sc.Name, limit)
					return
				}
				t.Logf("%s: every execution explored up to %d steps", sc.Name, level.MaxSteps)
			}
		})
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
