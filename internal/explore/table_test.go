package explore_test

import (
	"fmt"
	"os"
	"strings"
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
// a comma-separated list of names.
func TestTable(t *testing.T) {
	which := os.Getenv("INITLOCK_EXPLORE_TABLE")
	if which == "" {
		t.Skip("set INITLOCK_EXPLORE_TABLE=all, test, deep or scenario names to measure the explorer")
	}
	budget := 3 * time.Minute
	if v := os.Getenv("INITLOCK_EXPLORE_BUDGET"); v != "" {
		var err error
		if budget, err = time.ParseDuration(v); err != nil {
			t.Fatal(err)
		}
	}
	var scs []explore.Scenario
	switch which {
	case "test":
		scs = explore.Scenarios()
	case "deep":
		scs = explore.DeepScenarios()
	default:
		for _, sc := range append(explore.Scenarios(), explore.DeepScenarios()...) {
			if which == "all" || contains(strings.Split(which, ","), sc.Name) {
				scs = append(scs, sc)
			}
		}
	}
	var rows []string
	for _, sc := range scs {
		stop := make(chan struct{})
		timer := time.AfterFunc(budget, func() { close(stop) })
		sc.Stop = stop
		var res explore.Result
		start := time.Now()
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
		row := fmt.Sprintf("| %s | %d | %d | %d | %s | %s |", sc.Name, res.States, res.Executions, res.Deepest,
			time.Since(start).Round(10*time.Millisecond), end)
		t.Log(row)
		rows = append(rows, row)
	}
	t.Log("\n| scenario | states | executions | deepest | wall | end |\n|---|---|---|---|---|---|\n" + strings.Join(rows, "\n"))
}

func contains(s []string, v string) bool {
	for _, x := range s {
		if x == v {
			return true
		}
	}
	return false
}
