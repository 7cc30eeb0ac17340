package explore_test

import (
	"fmt"
	"os"
	"slices"
	"strings"
	"syscall"
	"testing"
	"testing/synctest"
	"time"

	"github.com/initlock/initlock/internal/explore"
)

// TestTable explores the scenarios one after the other, each at its own
// step bound and within a time budget ($INITLOCK_EXPLORE_BUDGET, 3m by
// default), and logs a table of states, executions, deepest step and wall
// time: the measure of the reductions. It runs with
// INITLOCK_EXPLORE_TABLE=all, =test (Scenarios), =deep (DeepScenarios) or
// a comma-separated list of names; INITLOCK_EXPLORE_OFF=sleep,symmetry,forget
// turns reductions off.
func TestTable(t *testing.T) {
	which := os.Getenv("INITLOCK_EXPLORE_TABLE")
	if which == "" {
		t.Skip("set INITLOCK_EXPLORE_TABLE=all, test, deep or scenario names to measure the explorer")
	}
	budget := envBudget(t, 3*time.Minute)
	var scs []explore.Scenario
	switch which {
	case "test":
		scs = explore.Scenarios()
	case "deep":
		scs = explore.DeepScenarios()
	default:
		for _, sc := range append(explore.Scenarios(), explore.DeepScenarios()...) {
			if which == "all" || slices.Contains(strings.Split(which, ","), sc.Name) {
				scs = append(scs, sc)
			}
		}
	}
	var off explore.Reduction
	for _, name := range strings.Split(os.Getenv("INITLOCK_EXPLORE_OFF"), ",") {
		switch name {
		case "sleep":
			off |= explore.SleepSets
		case "symmetry":
			off |= explore.Symmetry
		case "forget":
			off |= explore.Forget
		case "":
		default:
			t.Fatalf("INITLOCK_EXPLORE_OFF: unknown reduction %q (sleep, symmetry, forget)", name)
		}
	}
	var rows []string
	for _, sc := range scs {
		sc.Off = off
		stop := make(chan struct{})
		timer := time.AfterFunc(budget, func() { close(stop) })
		sc.Stop = stop
		var res explore.Result
		start, cpu := time.Now(), cpuTime()
		synctest.Test(t, func(t *testing.T) { res = explore.Explore(sc) })
		timer.Stop()
		end := "complete"
		switch {
		case res.Stopped:
			end = "stopped"
		case res.Violation != nil:
			end = fmt.Sprintf("violation in %d", len(res.Violation.Steps))
		case res.Truncated > 0:
			end = fmt.Sprintf("%d cut", res.Truncated)
		}
		row := fmt.Sprintf("| %s | %d | %d | %d | %s | %s | %s |", sc.Name, res.States, res.Executions, res.Deepest,
			time.Since(start).Round(10*time.Millisecond), (cpuTime() - cpu).Round(10*time.Millisecond), end)
		t.Log(row)
		rows = append(rows, row)
	}
	t.Log("\n| scenario | states | executions | deepest | wall | CPU | end |\n|---|---|---|---|---|---|---|\n" + strings.Join(rows, "\n"))
}

// cpuTime is the CPU time the process has used.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
