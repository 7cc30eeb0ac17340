package explore

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"testing"
	"testing/synctest"

	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/initlock/initlock/internal/kubeenv/faults"
)

// TestReductions checks the reductions against the search without them, on
// small scenarios and on buggy variants of the protocol: the states where
// no eager choice is pending must be the same, each at the same shortest
// step (sleep sets skip steps, never such states; symmetry maps each to
// its orbit's digest), and so must every invariant's violations and the
// shortest length of each, with the digest forgetting or not.
func TestReductions(t *testing.T) {
	skipShort(t)
	for _, sc := range smallScenarios() {
		t.Run(sc.Name, func(t *testing.T) {
			t.Parallel()
			none := search(t, sc, SleepSets|Symmetry)
			for _, off := range []Reduction{Symmetry, SleepSets, 0} {
				got := search(t, sc, off)
				if !maps.Equal(got.violations, none.violations) {
					t.Errorf("off=%d: violations %v, without reductions %v", off, got.violations, none.violations)
				}
				if off&Symmetry != 0 && !maps.Equal(got.states, none.states) {
					t.Errorf("off=%d: %d states reached, without reductions %d; %d differ", off, len(got.states), len(none.states), differ(got.states, none.states))
				}
				if !maps.Equal(got.orbits, none.orbits) {
					t.Errorf("off=%d: %d orbits reached, without reductions %d; %d differ", off, len(got.orbits), len(none.orbits), differ(got.orbits, none.orbits))
				}
			}
			// Forgetting changes the digest, not what is reachable.
			if all := search(t, sc, SleepSets|Symmetry|Forget); !maps.Equal(all.violations, none.violations) {
				t.Errorf("without forgetting: violations %v, forgetting %v", all.violations, none.violations)
			}
			if len(none.violations) == 0 && sc.bug != nil {
				t.Errorf("the buggy variant has no violation")
			}
		})
	}
}

// smallScenarios are the scenarios the reductions are checked on, with
// the step bounds of TestReductions.
func smallScenarios() []Scenario {
	p := func(m string) Provider { return Provider{Machine: m, Attempts: 1} }
	return []Scenario{
		{Name: "race", Providers: []Provider{p("m1"), p("m2")}, MaxSteps: 16},
		{Name: "race-3", Providers: []Provider{p("m1"), p("m2"), p("m3")}, MaxSteps: 10},
		{Name: "loss", Providers: []Provider{p("m1"), p("m2")},
			Adversary: []EventKind{DeleteLock, RemoveRegister, RevertRegister}, Events: 1, Losses: 1, MaxSteps: 11},
		{Name: "manager", Providers: []Provider{p("m1"), p("m2")}, Reconciles: 1, ManagerViewDepth: 1, StaleReads: 1,
			Adversary: []EventKind{DeleteLock}, Events: 1, Losses: 1, MaxSteps: 11},
		{Name: "race-no-cas", Providers: []Provider{p("m1"), p("m2")}, Annotated: true, MaxSteps: 12, bug: noTests},
		{Name: "pause-no-test", Providers: []Provider{{Machine: "m1", Attempts: 1, ViewDepth: 1}, {Machine: "m2", Attempts: 1, ViewDepth: 1}},
			StaleReads: 1, Adversary: []EventKind{Pause}, Events: 1, MaxSteps: 11, bug: noTests},
		{Name: "relock-no-preconditions", Providers: []Provider{{Machine: "m1", Attempts: 2, Unlock: true, ViewDepth: 3}},
			StaleReads: 1, Faults: 1, FaultKinds: []faults.Class{faults.LateWrite}, Late: 1, MaxSteps: 30, bug: noPreconditions},
	}
}

type searched struct {
	// states and orbits map the states reached where no eager choice is
	// pending, by their digest (orbits: by their orbit's digest), to the
	// shortest step they were reached at.
	states, orbits map[stateKey]int
	violations     map[string]int
}

func search(t *testing.T, sc Scenario, off Reduction) searched {
	sc.Off = off
	withSym := sc
	withSym.Off = 0
	sym := newSymmetry(&withSym)
	out := searched{states: map[stateKey]int{}, orbits: map[stateKey]int{}, violations: map[string]int{}}
	note := func(m map[stateKey]int, k stateKey, step int) {
		if d, ok := m[k]; !ok || step < d {
			m[k] = step
		}
	}
	synctest.Test(t, func(t *testing.T) {
		x := newExplorer(sc)
		x.violations = out.violations
		x.reached = func(s *System, k stateKey, step int) {
			if s.eager() {
				return
			}
			saved := s.sym
			s.sym = nil
			plain, _ := s.digest()
			s.sym = sym
			orbit, _ := s.digest()
			s.sym = saved
			note(out.states, plain, step)
			note(out.orbits, orbit, step)
		}
		res := x.run()
		t.Logf("off=%d: %s; violations %v", off, res, out.violations)
	})
	return out
}

func differ(a, b map[stateKey]int) int {
	n := 0
	for k, d := range a {
		if e, ok := b[k]; !ok || e != d {
			n++
		}
	}
	for k := range b {
		if _, ok := a[k]; !ok {
			n++
		}
	}
	return n
}

// noTests drops the test operations of JSON patches: the claim of the
// register is no longer a compare-and-swap, nor tests that the Cluster is
// not paused.
func noTests(c client.Client) client.Client { return noTestsClient{c} }

type noTestsClient struct{ client.Client }

func (c noTestsClient) Patch(ctx context.Context, obj client.Object, p client.Patch, opts ...client.PatchOption) error {
	return c.Client.Patch(ctx, obj, noTestsPatch{p}, opts...)
}

type noTestsPatch struct{ client.Patch }

func (p noTestsPatch) Data(obj client.Object) ([]byte, error) {
	data, err := p.Patch.Data(obj)
	if err != nil || p.Type() != types.JSONPatchType {
		return data, err
	}
	var ops []map[string]any
	if err := json.Unmarshal(data, &ops); err != nil {
		return nil, fmt.Errorf("noTests: %w", err)
	}
	ops = slices.DeleteFunc(ops, func(op map[string]any) bool { return op["op"] == "test" })
	return json.Marshal(ops)
}

// noPreconditions deletes without UID or resourceVersion preconditions.
func noPreconditions(c client.Client) client.Client { return noPreconditionsClient{c} }

type noPreconditionsClient struct{ client.Client }

func (c noPreconditionsClient) Delete(ctx context.Context, obj client.Object, _ ...client.DeleteOption) error {
	return c.Client.Delete(ctx, obj)
}

// TestAnyDepth checks the depth-blind cache of the deep runs
// (Scenario.AnyDepth) against the cache tied to depth, on the scenarios of
// TestReductions explored to their end: the same states are reached, and the same
// invariants are violated.
func TestAnyDepth(t *testing.T) {
	skipShort(t)
	for _, sc := range smallScenarios() {
		sc.MaxSteps = 100 // each ends well within it
		t.Run(sc.Name, func(t *testing.T) {
			t.Parallel()
			tied := reach(t, sc)
			sc.AnyDepth = true
			blind := reach(t, sc)
			if !maps.Equal(blind.states, tied.states) {
				t.Errorf("AnyDepth: %d states reached, with the cache tied to depth %d", len(blind.states), len(tied.states))
			}
			if !slices.Equal(slices.Sorted(maps.Keys(blind.violations)), slices.Sorted(maps.Keys(tied.violations))) {
				t.Errorf("AnyDepth: violations of %v, with the cache tied to depth %v", blind.violations, tied.violations)
			}
			if len(tied.violations) == 0 && sc.bug != nil {
				t.Errorf("the buggy variant has no violation")
			}
		})
	}
}

// skipShort skips, with -short (make quick), the checks of the explorer's
// own reductions, which change only with the explorer's search; make test
// runs them.
func skipShort(t *testing.T) {
	t.Helper()
	if testing.Short() {
		t.Skip("-short: the search's reductions are checked by make test")
	}
}

// reach explores sc to its end and returns the states it reached (the
// step is not kept) and the invariants violated.
func reach(t *testing.T, sc Scenario) searched {
	out := searched{states: map[stateKey]int{}, violations: map[string]int{}}
	synctest.Test(t, func(t *testing.T) {
		x := newExplorer(sc)
		x.violations = out.violations
		x.reached = func(_ *System, k stateKey, _ int) { out.states[k] = 0 }
		res := x.run()
		if res.Truncated > 0 {
			t.Fatalf("%s: %d executions cut at the step bound", sc.Name, res.Truncated)
		}
		t.Logf("AnyDepth=%v: %s; violations %v", sc.AnyDepth, res, out.violations)
	})
	return out
}
