package explore

import (
	"fmt"
	"slices"
	"strings"
	"time"

	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/initlock/initlock/internal/kubeenv/faults"
)

// Scenario bounds one exploration: who acts, how often, which faults and
// which adversary events may happen, and how deep it goes.
type Scenario struct {
	Name string
	// Providers are the bootstrap providers' scripts, one per Machine.
	Providers []Provider
	// Reconciles is how many reconciles the manager makes (none: 0), and
	// ManagerViewDepth how many versions back its cache may be.
	Reconciles, ManagerViewDepth int
	// Guard installs the lock guard the manager ships (the admission policy
	// of config/protection, evaluated by apimodel.Guard): every delete of
	// the lock, by an actor or the adversary, that is not marked for
	// release is refused. Without it the library is explored alone, as on
	// a management cluster without initlock-manager.
	Guard bool
	// StaleReads bounds how many cache reads of an execution may show a
	// version older than the live one (within the actors' view depths).
	StaleReads int
	// Faults is how many write requests may be held back (applied late,
	// or never), or, with Late 0, fail or lose their answer. FaultsOn,
	// when set, names the requests that may: "<actor> <verb> <kind>", any
	// part "*".
	Faults, Late int
	FaultsOn     []string
	// FaultKinds are the request fault classes of the catalogue
	// (internal/kubeenv/faults) a write may meet: faults.LateWrite,
	// ServerError (503, not applied), LostResponse, Refused (403). By
	// default, late writes when Late allows them (a write held back
	// subsumes one that fails, never applied, and one whose answer is
	// lost, applied at the next step), else server errors and lost
	// answers.
	FaultKinds []faults.Class
	// Adversary lists the events that may happen; Events bounds how many,
	// Losses how many of them lose a protection (the lock or the register).
	Adversary      []EventKind
	Events, Losses int
	// Operator runs kubectl initlock release once, without --force, as the
	// command does: it reads live, decides, and releases what it
	// inspected (Unlock as an operator, bound to the lock's UID and
	// resourceVersion and the register's value it read).
	Operator bool
	// OperatorForce makes the operator's release a forced one (--force):
	// it releases what it inspected even while a Machine it names exists.
	OperatorForce bool
	// UpstreamHolder, when set, holds the lock from the start, written as
	// an upstream provider writes it.
	UpstreamHolder string
	// GrantHolder, when set, is named by the Cluster's grant register from
	// the start, by name only (as a restore leaves it), with no lock: the
	// lock lost. DeleteMachine and MachineBack act on it as on
	// UpstreamHolder.
	GrantHolder string
	// LibraryHolder, when set, holds the lock from the start as
	// pkg/initlock grants it: the grant register and the lock name it by
	// its own and the Cluster's UIDs, with one token. DeleteMachine and
	// MachineBack act on it as on UpstreamHolder.
	LibraryHolder string
	// Annotated starts the Cluster with an annotation of another tool, so
	// that the register's first write is a test of its key, not of the
	// annotations map.
	Annotated bool
	// Relink runs the relinker (internal/relink) once on a ConfigMap a
	// restore brought back, recording these Machines, which the same
	// restore brought back, as its owners (relinker.go).
	Relink []string
	// Before are adversary events that happened before the exploration
	// starts, in order: they shape the history caches may show.
	Before []EventKind
	// MaxSteps bounds the depth of every execution, in scheduler steps.
	MaxSteps int
	// AnyDepth caches what was explored from a state whatever step it was
	// reached at, instead of exploring it again from a state reached again
	// at a smaller step. That is sound only for a search that cuts nothing:
	// with Result.Truncated 0 the scenario is explored to its end, and with
	// any execution cut it proves nothing (a subtree cut once is not
	// explored again). A violation found is not always the shortest.
	AnyDepth bool
	// Stop, when closed, ends the exploration early (Result.Stopped): a
	// time budget, set from outside the synctest bubble.
	Stop <-chan struct{}
	// Budget, for a deep scenario, is the time make explore gives it, and
	// tells that it must be explored to its end within it; with none, it
	// gets $INITLOCK_EXPLORE_BUDGET and the run reports how far it got.
	Budget time.Duration
	// Off turns reductions of the search off (all are on by default).
	Off Reduction
	// bug, for tests, wraps the providers' client to break the protocol.
	bug func(client.Client) client.Client
}

// Provider is the script of one bootstrap provider reconciling one
// Machine's bootstrap configuration.
type Provider struct {
	Machine string
	// Name tells two providers of one Machine name apart (as reconciles of
	// two incarnations' configurations); the Machine's name by default.
	Name string
	// Attempts is how many times it calls Lock.
	Attempts int
	// Unlock lets its init fail after a grant, and the provider call
	// Unlock.
	Unlock bool
	// AnyHolder makes its Unlock release the lock whoever holds it, with
	// no Machine, as the drop-in mutex's Unlock(cluster) does (package
	// locking): CABPK's failed-init path calls it so.
	AnyHolder bool
	// Upstream runs CABPK's own mutex instead of initlock's Locker.
	Upstream bool
	// Relock lets its reconcile end after a grant before the Machine's
	// bootstrap data is written (a failed status update, a restore), so
	// that the next reconcile calls Lock again, as the holder.
	Relock bool
	// Adopt makes each of its reconciles call Adopt before Lock, as
	// CABPK's branch that restores a bootstrap config's status does for a
	// control-plane Machine (with the full patch's gate on).
	Adopt bool
	// ViewDepth is how many versions back its cache may be.
	ViewDepth int
	// Incarnation, when not 0, restricts the provider to that incarnation
	// of its Machine (1 for the first, 2 once created again): the
	// reconciles of one incarnation's configuration are serialised, those
	// of two incarnations' are not.
	Incarnation int
}

func (sc *Scenario) machines() []string {
	var ms []string
	for _, p := range sc.Providers {
		if !slices.Contains(ms, p.Machine) {
			ms = append(ms, p.Machine)
		}
	}
	if h := sc.holder(); h != "" && !slices.Contains(ms, h) {
		ms = append(ms, h)
	}
	slices.Sort(ms)
	return ms
}

// holder is the Machine that holds the lock, or the grant, from the start.
func (sc *Scenario) holder() string {
	if sc.UpstreamHolder != "" {
		return sc.UpstreamHolder
	}
	if sc.LibraryHolder != "" {
		return sc.LibraryHolder
	}
	return sc.GrantHolder
}

// upstreamProviders tells whether a provider runs CABPK's own mutex.
func (sc *Scenario) upstreamProviders() bool {
	return slices.ContainsFunc(sc.Providers, func(p Provider) bool { return p.Upstream })
}

// upstreamActor tells whether actor is a provider running CABPK's own
// mutex.
func (sc *Scenario) upstreamActor(actor string) bool {
	return slices.ContainsFunc(sc.Providers, func(p Provider) bool { return p.Upstream && p.actor() == actor })
}

// viewDepth is how many versions back actor's cache may be.
func (sc *Scenario) viewDepth(actor string) int {
	if actor == "manager" {
		return sc.ManagerViewDepth
	}
	for _, p := range sc.Providers {
		if p.actor() == actor {
			return p.ViewDepth
		}
	}
	return 0
}

func (p Provider) actor() string {
	if p.Name != "" {
		return "provider/" + p.Name
	}
	return "provider/" + p.Machine
}

// faultable tells whether r may be faulted.
func (sc *Scenario) faultable(actor, verb, kind string) bool {
	if len(sc.FaultsOn) == 0 {
		return true
	}
	for _, f := range sc.FaultsOn {
		parts := strings.Fields(f)
		if len(parts) == 3 && match(parts[0], actor) && match(parts[1], verb) && match(parts[2], kind) {
			return true
		}
	}
	return false
}

func match(pattern, s string) bool { return pattern == "*" || pattern == s }

func (sc *Scenario) faultKinds() []outcome {
	if len(sc.FaultKinds) == 0 {
		if sc.Late > 0 {
			return []outcome{late}
		}
		return []outcome{failed, lost}
	}
	var out []outcome
	for _, k := range sc.FaultKinds {
		o := slices.Index(outcomeClasses[:], k)
		if o <= int(served) {
			panic(fmt.Sprintf("explore: scenario %s: %q is not a request fault class the explorer models", sc.Name, k))
		}
		out = append(out, outcome(o))
	}
	return out
}

// Result is what an exploration found.
type Result struct {
	Scenario string
	// States is the number of distinct states expanded, Executions the
	// number of runs of the code, Deepest the deepest step reached.
	States, Executions, Deepest int
	// Truncated counts the executions cut at MaxSteps; Complete tells that
	// none was, so that every execution ran to its end.
	Truncated int
	// OperatorNeeded counts the executions that ended in a state only an
	// operator can resolve (a conflict a restore brought back).
	OperatorNeeded int
	// Stopped tells that Scenario.Stop ended the exploration before it
	// was complete: nothing is proved then.
	Stopped bool
	// Faults counts, by fault class, the choices of each class explored
	// from a new state, and the events that happened before the start.
	Faults faults.Tally
	// Violation is the shortest counterexample found, nil when none.
	Violation *Counterexample
}

// Counterexample is a violation and the steps that lead to it.
type Counterexample struct {
	Violation Violation
	Steps     []string
}

func (c *Counterexample) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s, after %d steps:\n", c.Violation, len(c.Steps))
	for i, s := range c.Steps {
		fmt.Fprintf(&b, "  %2d. %s\n", i+1, s)
	}
	return b.String()
}

func (r Result) String() string {
	s := fmt.Sprintf("%s: %d states, %d executions, deepest %d steps", r.Scenario, r.States, r.Executions, r.Deepest)
	if r.Truncated > 0 {
		s += fmt.Sprintf(", %d executions cut at the step bound", r.Truncated)
	}
	if r.OperatorNeeded > 0 {
		s += fmt.Sprintf(", %d ending in a conflict for an operator", r.OperatorNeeded)
	}
	if r.Stopped {
		s += ", stopped by its time budget before the end (incomplete)"
	}
	if r.Violation != nil {
		s += fmt.Sprintf(", violation of %s in %d steps", r.Violation.Violation.Invariant, len(r.Violation.Steps))
	} else {
		s += ", no violation"
	}
	return s
}
