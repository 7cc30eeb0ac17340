package chaos

import (
	"slices"
	"testing"

	"github.com/initlock/initlock/internal/kubeenv/faults"
)

// TestFaultCatalogue checks that chaos maps every fault class of the
// catalogue it models, and no other, and that every class the driver
// injects is one of the catalogue that chaos models, listed once.
func TestFaultCatalogue(t *testing.T) {
	if err := faults.Check(faults.Chaos, classMap()); err != nil {
		t.Error(err)
	}
	seen := map[faults.Class]bool{}
	for _, c := range driverClasses {
		e, ok := faults.Lookup(c)
		switch {
		case !ok:
			t.Errorf("the driver injects %q, which is not a fault class of the catalogue", c)
		case !e.Models(faults.Chaos):
			t.Errorf("the driver injects fault class %s, which its entry says chaos does not model: %s", c, e.Unmodelled[faults.Chaos])
		case seen[c]:
			t.Errorf("driverClasses lists fault class %s twice", c)
		}
		seen[c] = true
		if slices.ContainsFunc(requestFaults, func(rf requestFault) bool { return rf.class == c }) {
			t.Errorf("fault class %s is injected both by the driver and by the Injector's request faults", c)
		}
	}
}

// TestPlansExerciseEveryClass checks that the plans Generate makes enable
// every fault class chaos models, that every action they hold injects a
// class the driver injects, and that each has two or three replicas, the
// first without leader election, and as many clusters as its size allows.
func TestPlansExerciseEveryClass(t *testing.T) {
	for _, size := range []Size{SizeShort, SizeLong} {
		planned := faults.Tally{}
		for seed := range uint64(200) {
			p := Generate(seed, size)
			if len(p.LeaderElection) < 2 || p.LeaderElection[0] {
				t.Fatalf("seed %d: replicas %v, want 2 or 3, the first without leader election", seed, p.LeaderElection)
			}
			if n := len(p.Clusters); n < size.MinClusters || n > size.MaxClusters {
				t.Fatalf("seed %d: %d clusters", seed, n)
			}
			for _, c := range p.Planned() {
				planned[c]++
			}
			for _, a := range p.Actions {
				if !slices.Contains(driverClasses, a.Kind) {
					t.Fatalf("seed %d: action %s injects a fault class that is not in driverClasses", seed, a)
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
