package chaos

import (
	"slices"

	"github.com/initlock/initlock/internal/kubeenv/faults"
)

// classUse is how chaos injects one fault class of the catalogue
// (internal/kubeenv/faults): the names of its own that inject it, whether
// a plan enables it, and how many times a scenario injected it.
type classUse struct {
	names   []string
	planned func(Plan) bool
	count   func(*Result) int
}

// classUses is chaos's mapping from the fault catalogue: the Injector's
// request faults (requestFaults), the driver's actions (driverClasses,
// an action's Kind being the class it injects), and the faults of the
// plan's callers and inits below.
func classUses() map[faults.Class]classUse {
	m := map[faults.Class]classUse{}
	either := func(prob func(Faults) float64) func(Plan) bool {
		return func(p Plan) bool { return prob(p.ClientFaults) > 0 || prob(p.ManagerFaults) > 0 }
	}
	requests := func(c faults.Class) func(*Result) int {
		return func(r *Result) int { return r.ClientFaults.ByClass[c] + r.ManagerFaults.ByClass[c] }
	}
	for _, rf := range requestFaults {
		m[rf.class] = classUse{names: []string{"Faults." + rf.field}, planned: either(rf.prob), count: requests(rf.class)}
	}
	for _, c := range driverClasses {
		m[c] = classUse{names: []string{"driver action " + string(c)},
			planned: func(p Plan) bool { return slices.ContainsFunc(p.Actions, func(a Action) bool { return a.Kind == c }) },
			count:   func(r *Result) int { return r.Actions[c] }}
	}
	m[faults.Latency] = classUse{names: []string{"Faults.MaxLatency"},
		planned: either(func(f Faults) float64 { return float64(f.MaxLatency) }), count: requests(faults.Latency)}
	m[faults.StaleCallerView] = classUse{names: []string{"Plan.StaleViews"},
		planned: func(p Plan) bool { return p.StaleViews > 0 }, count: func(r *Result) int { return r.Counts.StaleViews }}
	m[faults.ManagerCacheLag] = classUse{names: []string{"Plan.ManagerFaults.WatchLag"},
		planned: func(p Plan) bool { return p.ManagerFaults.WatchLag > 0 },
		count:   func(r *Result) int { return r.ManagerFaults.LaggedWatches }}
	m[faults.RelinkerCacheLag] = classUse{names: []string{"Plan.ManagerFaults.RelinkWatchLag"},
		planned: func(p Plan) bool { return p.ManagerFaults.RelinkWatchLag > 0 },
		count:   func(r *Result) int { return r.ManagerFaults.LaggedRelinkWatches }}
	m[faults.CallCutOff] = classUse{names: []string{"Plan.Interrupt"},
		planned: func(p Plan) bool { return p.Interrupt > 0 }, count: func(r *Result) int { return r.CutOff }}
	m[faults.InitCompletes] = classUse{names: []string{"Plan.InitSuccess"},
		planned: func(p Plan) bool { return p.InitSuccess > 0 }, count: func(r *Result) int { return r.Counts.Inits }}
	m[faults.InitFails] = classUse{names: []string{"Plan.InitSuccess below 1"},
		planned: func(p Plan) bool { return p.InitSuccess < 1 }, count: func(r *Result) int { return r.Counts.UnlockCalls }}
	// A holder whose init runs is reconciled again now and then
	// (controller.loop), and calls Lock again.
	m[faults.Relock] = classUse{names: []string{"a holder's reconcile during its init"},
		planned: func(p Plan) bool { return p.Controllers > 0 }, count: func(r *Result) int { return r.Counts.ReLocks }}
	return m
}

// classMap is classUses as the catalogue checks it.
func classMap() faults.Map {
	m := faults.Map{}
	for c, u := range classUses() {
		m[c] = u.names
	}
	return m
}

// Planned returns the fault classes the plan enables.
func (p Plan) Planned() []faults.Class {
	var out []faults.Class
	uses := classUses()
	for _, c := range faults.Modelled(faults.Chaos) {
		if u, ok := uses[c]; ok && u.planned(p) {
			out = append(out, c)
		}
	}
	return out
}

// Faults counts the faults of each class the scenario injected.
func (r *Result) Faults() faults.Tally {
	t := faults.Tally{}
	for c, u := range classUses() {
		if n := u.count(r); n > 0 {
			t[c] = n
		}
	}
	return t
}
