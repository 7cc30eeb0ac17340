package explore

import (
	"context"
	"fmt"
	"sort"
	"strings"

	apierrors "k8s.io/apimachinery/pkg/api/errors"

	"github.com/initlock/initlock/internal/kubeenv/apimodel"
	"github.com/initlock/initlock/internal/kubeenv/faults"
)

// outcome is what becomes of a request the scheduler picks.
type outcome int

const (
	// served: applied now, answered.
	served outcome = iota
	// failed: not applied; the caller gets 503.
	failed
	// lost: applied now; the answer is lost (the caller gets a timeout).
	lost
	// late: not applied yet; the caller gets a timeout, and the request is
	// applied later, when the scheduler picks it, or never.
	late
	// refused: not applied; the caller gets 403 Forbidden (a missing
	// permission, an admission webhook).
	refused
)

var outcomeNames = [...]string{"served", "failed (503, not applied)", "applied, answer lost", "held back (applied late)", "refused (403)"}

// outcomeClasses are the fault classes of the outcomes; served is none.
var outcomeClasses = [...]faults.Class{
	failed:  faults.ServerError,
	lost:    faults.LostResponse,
	late:    faults.LateWrite,
	refused: faults.Refused,
}

// pending is a request, or a view read, an actor is blocked on.
type pending struct {
	req  *apimodel.Request
	view *viewRead
	// branch, when set, is a choice of the actor's own script among n ways.
	branch *branchPoint
	done   chan struct{}
	seq    int
	// key orders the pending items (pendingKey).
	key string
	// round numbers the requests an actor issues together: those it has
	// outstanding at once are answered in any order, and its code joins
	// them before going on.
	round int
}

func (p *pending) actor() string {
	switch {
	case p.req != nil:
		return p.req.Actor
	case p.view != nil:
		return p.view.actor
	}
	return p.branch.actor
}

// branchPoint is a point of an actor's script where the scheduler picks
// one of its ways (for example: the init that the lock guards fails, or it
// goes on).
type branchPoint struct {
	actor  string
	what   string
	ways   []string
	chosen int
	// wait marks a point where the actor waits to be scheduled (its next
	// reconcile), which the scheduler may delay; other branches are the
	// actor's own choices, made at once.
	wait bool
}

// viewRead is a read of an actor's informer cache: any version of the
// object not older than what the actor last saw of it.
type viewRead struct {
	actor  string
	key    apimodel.Key
	chosen apimodel.Version
}

// gate is the apimodel.Gate of one execution: every request blocks until
// the scheduler picks it.
type gate struct {
	sys     *System
	pending []*pending
	seq     int
	// sorted tells that pending is in order.
	sorted bool
}

var _ apimodel.Gate = (*gate)(nil)

func (g *gate) Serve(_ context.Context, r *apimodel.Request) {
	if g.sys.isAborted() {
		r.Err = context.Canceled
		return
	}
	if g.sys.isAuto() {
		g.sys.autoMu.Lock()
		defer g.sys.autoMu.Unlock()
		g.sys.exec(r)
		return
	}
	p := &pending{req: r, done: make(chan struct{})}
	g.add(p)
	<-p.done
}

func (g *gate) add(p *pending) {
	s := g.sys
	s.mu.Lock()
	g.seq++
	p.seq = g.seq
	a := p.actor()
	if s.outstanding[a] == 0 {
		s.rounds[a]++
	}
	s.outstanding[a]++
	p.round = s.rounds[a]
	s.checker.issued(s, g.pending, p)
	g.pending = append(g.pending, p)
	g.sorted = false
	s.mu.Unlock()
}

// choice is one of the scheduler's options at a step.
type choice struct {
	// exactly one of these is set
	p     *pending
	out   outcome
	ver   int // for a view read: the index of the version
	way   int // for a branch
	lateI int // for a late write: its index, applied now
	event *event
	text  string
	// class is the fault class the choice injects, if any.
	class faults.Class
}

// sortPending orders the blocked requests independently of the order in
// which goroutines reached the gate: by actor, then by what they ask.
func (g *gate) sortPending() {
	if g.sorted {
		return
	}
	sort.SliceStable(g.pending, func(i, j int) bool {
		return pendingKey(g.pending[i]) < pendingKey(g.pending[j])
	})
	g.sorted = true
}

func pendingKey(p *pending) string {
	if p.key == "" {
		p.key = pendingKeyOf(p)
	}
	return p.key
}

func pendingKeyOf(p *pending) string {
	switch {
	case p.req != nil:
		return p.req.Actor + "\x00" + p.req.Verb + "\x00" + p.req.Key.String() + "\x00" + p.req.Body
	case p.view != nil:
		return p.view.actor + "\x00view\x00" + p.view.key.String()
	}
	return p.branch.actor + "\x00branch\x00" + p.branch.what
}

// options lists the choices for the pending items, the late writes and the
// adversary's events, in a fixed order.
//
// A read of an actor's cache, or a choice of its own script, is taken
// before anything else (a partial-order reduction): it changes nothing
// another actor sees, and the actor reaches it only right after a point
// the scheduler may delay at will (its reconcile's start, or the answer to
// one of its requests). A cache read may show any version not older than
// what the actor saw, so reading at once, and possibly an old version,
// shows what reading later would.
func (s *System) options() []choice {
	if p := s.eagerPending(); p != nil {
		return s.optionsOf(p)
	}
	return s.allOptions()
}

// eagerPending is the first cache read or actor's own choice pending, nil
// when there is none.
func (s *System) eagerPending() *pending {
	g := s.gate
	g.sortPending()
	for _, p := range g.pending {
		if p.view != nil || (p.branch != nil && !p.branch.wait) {
			return p
		}
	}
	return nil
}

// eager tells whether the state's choices are those of an eager item.
func (s *System) eager() bool { return s.eagerPending() != nil }

// allOptions lists every choice, as options does without its reduction.
func (s *System) allOptions() []choice {
	g := s.gate
	g.sortPending()
	var out []choice
	for _, p := range g.pending {
		out = append(out, s.optionsOf(p)...)
	}
	for i, l := range s.late {
		out = append(out, choice{lateI: i + 1, text: fmt.Sprintf("%s: late %s: applied now", l.Actor, describeRequest(l))})
	}
	for _, e := range s.events() {
		out = append(out, choice{event: e, text: "adversary: " + e.name, class: eventClasses[e.kind]})
	}
	return out
}

// optionsOf lists the choices of one pending item.
func (s *System) optionsOf(p *pending) []choice {
	var out []choice
	switch {
	case p.branch != nil:
		for i, w := range p.branch.ways {
			out = append(out, choice{p: p, way: i, text: fmt.Sprintf("%s: %s: %s", p.branch.actor, p.branch.what, w), class: wayClasses[w]})
		}
	case p.view != nil:
		vs := s.viewVersions(p.view)
		for i := range vs {
			c := choice{p: p, ver: i, text: fmt.Sprintf("%s: cache read %s sees %s", p.view.actor, p.view.key, describeVersion(vs[i], i == len(vs)-1))}
			if i < len(vs)-1 {
				c.class = staleReadClass(p.view.actor)
			}
			out = append(out, c)
		}
	default:
		// A write held back subsumes one that fails (it is never
		// applied) and one whose answer is lost (it is applied at the
		// next step): with late writes allowed, they are not
		// explored apart. Reads are not faulted.
		outs := []outcome{served}
		if p.req.Write() && s.budget.faults > 0 && s.sc.faultable(p.req.Actor, p.req.Verb, p.req.Key.Kind) {
			for _, o := range s.sc.faultKinds() {
				if o != late || s.budget.late > 0 {
					outs = append(outs, o)
				}
			}
		}
		for _, o := range outs {
			out = append(out, choice{p: p, out: o, text: fmt.Sprintf("%s: %s: %s", p.req.Actor, describeRequest(p.req), outcomeNames[o]),
				class: outcomeClasses[o]})
		}
	}
	return out
}

// apply carries out a choice. The checker observes the state it leads to
// before any actor it releases runs on.
func (s *System) apply(c choice) {
	switch {
	case c.event != nil:
		s.budget.spend(c.event.cost)
		c.event.run(s)
		s.observe()
	case c.lateI > 0:
		r := s.late[c.lateI-1]
		s.late = append(s.late[:c.lateI-1], s.late[c.lateI:]...)
		s.exec(r)
		s.observe()
	default:
		s.gate.remove(c.p)
		switch {
		case c.p.branch != nil:
			c.p.branch.chosen = c.way
		case c.p.view != nil:
			vs := s.viewVersions(c.p.view)
			c.p.view.chosen = vs[c.ver]
			if c.ver < len(vs)-1 {
				s.budget.stale--
			}
			s.seen(c.p.view.actor, c.p.view.key, vs[c.ver].RV)
			s.checker.read(c.p.view.actor, c.p.view.key, vs[c.ver].Object)
		default:
			s.serve(c.p.req, c.out)
		}
		s.record(c.p, c)
		s.outstanding[c.p.actor()]--
		s.observe()
		close(c.p.done)
	}
}

func (g *gate) remove(p *pending) {
	for i, q := range g.pending {
		if q == p {
			g.pending = append(g.pending[:i], g.pending[i+1:]...)
			return
		}
	}
}

// serve gives request r outcome o.
func (s *System) serve(r *apimodel.Request, o outcome) {
	switch o {
	case served:
		s.exec(r)
	case failed:
		s.budget.faults--
		r.Result, r.Err = nil, apierrors.NewServiceUnavailable("injected: the request was not applied")
	case lost:
		s.budget.faults--
		s.exec(r)
		r.Result, r.Err = nil, apierrors.NewTimeoutError("injected: the request was applied but its answer was lost", 0)
	case late:
		s.budget.faults--
		s.budget.late--
		s.late = append(s.late, r)
		r.Result, r.Err = nil, apierrors.NewTimeoutError("injected: the request is held back and may be applied later", 0)
	case refused:
		s.budget.faults--
		r.Result, r.Err = nil, apierrors.NewForbidden(gr(r.Key.Kind), r.Key.Name, fmt.Errorf("injected: refused"))
	}
}

// exec applies r to the store, with the checker watching.
func (s *System) exec(r *apimodel.Request) {
	var before [2]map[string]any
	if r.Write() {
		before[0], _ = s.store.Get(clusterKey)
		before[1], _ = s.store.Get(lockKey)
	}
	r.Serve()
	switch {
	case r.Err == nil && r.Write():
		s.checker.applied(s, r, before)
	case r.Verb == "get" && (r.Err == nil || apierrors.IsNotFound(r.Err)):
		s.checker.read(r.Actor, r.Key, r.Result)
	}
}

func describeRequest(r *apimodel.Request) string {
	s := r.Verb + " " + r.Key.String()
	if r.Body != "" && r.Verb != "create" && r.Verb != "update" {
		s += " " + r.Body
	}
	if r.Verb == "create" || r.Verb == "update" {
		s += " " + summarize(r.Body)
	}
	return s
}

// summarize keeps the part of an object's JSON that the lock protocol
// reads.
func summarize(js string) string {
	if i := strings.Index(js, `"data":`); i >= 0 {
		end := strings.Index(js[i:], "}")
		if end > 0 {
			return js[i : i+end+1]
		}
	}
	return ""
}

func describeVersion(v apimodel.Version, latest bool) string {
	age := fmt.Sprintf("the version of rv %d", v.RV)
	if latest {
		age = "the live version"
	}
	if v.Object == nil {
		return "no object (" + age + ")"
	}
	return age
}

func (s *System) observe() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.checker.observe(s)
}
