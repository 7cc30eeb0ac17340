package chaos

import (
	"testing"

	"github.com/initlock/initlock/internal/kubeenv/faults"
)

// TestFaultCatalogue checks that chaos maps every fault class of the
// catalogue it models, and no other.
func TestFaultCatalogue(t *testing.T) {
	if err := faults.Check(faults.Chaos, classMap()); err != nil {
		t.Error(err)
	}
}

// TestPlansExerciseEveryClass checks that the plans Generate makes enable
// every fault class chaos models, and that every action they hold injects
// a class.
func TestPlansExerciseEveryClass(t *testing.T) {
	for _, size := range []Size{SizeShort, SizeLong} {
		planned := faults.Tally{}
		for seed := range uint64(200) {
			p := Generate(seed, size)
			for _, c := range p.Planned() {
				planned[c]++
			}
			for _, a := range p.Actions {
				if _, ok := actionClasses[a.Kind]; !ok {
					t.Fatalf("seed %d: action %s has no fault class in actionClasses", seed, a.Kind)
				}
			}
		}
		t.Logf("plans of 200 seeds (%s of activity) enabling each class: %s", size.Activity, planned.Format(faults.Chaos))
		for _, c := range planned.Missing(faults.Chaos) {
			e, _ := faults.Lookup(c)
			t.Errorf("no plan of 200 seeds (%s of activity) enables fault class %s (%s)", size.Activity, c, e.Meaning)
		}
	}
}
