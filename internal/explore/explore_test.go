package explore_test

import (
	"os"
	"testing"
	"testing/synctest"

	"github.com/go-logr/logr"
	ctrl "sigs.k8s.io/controller-runtime"

	"github.com/initlock/initlock/internal/explore"
)

func TestMain(m *testing.M) {
	ctrl.SetLogger(logr.Discard())
	m.Run()
}

// TestExplore runs the scenarios of make test; every one must end without
// a counterexample.
func TestExplore(t *testing.T) {
	explorations(t, explore.Scenarios())
}

// TestExploreDeep runs the larger scenarios, with
// INITLOCK_EXPLORE_DEEP=1 (make explore).
func TestExploreDeep(t *testing.T) {
	if os.Getenv("INITLOCK_EXPLORE_DEEP") == "" {
		t.Skip("set INITLOCK_EXPLORE_DEEP=1 (make explore) to run the deep scenarios")
	}
	explorations(t, explore.DeepScenarios())
}

func explorations(t *testing.T, scenarios []explore.Scenario) {
	for _, sc := range scenarios {
		t.Run(sc.Name, func(t *testing.T) {
			t.Parallel()
			synctest.Test(t, func(t *testing.T) {
				res := explore.Explore(sc)
				t.Log(res)
				if res.Violation != nil {
					t.Errorf("counterexample: %s", res.Violation)
				}
			})
		})
	}
}
