package explore_test

import (
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

func TestExplore(t *testing.T) {
	for _, sc := range explore.Scenarios() {
		t.Run(sc.Name, func(t *testing.T) {
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
