package explore

import (
	"testing"

	"github.com/initlock/initlock/internal/kubeenv/faults"
)

// TestFaultCatalogue checks that the explorer maps every fault class of
// the catalogue it models, and no other. (An event kind without a class
// panics as soon as it is offered; TestExplore checks that the scenarios
// exercise every class mapped here.)
func TestFaultCatalogue(t *testing.T) {
	if err := faults.Check(faults.Explorer, classMap()); err != nil {
		t.Error(err)
	}
}
