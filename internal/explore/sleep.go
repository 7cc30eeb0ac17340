package explore

import (
	"math"
	"strconv"
)

// sleeper is a choice asleep: explored already from an earlier state, and
// independent of every step taken since, so that taking it now leads
// nowhere new. label names it (label.concrete), fp is its footprint.
type sleeper struct {
	label uint64
	fp    footprint
}

func asleep(sleep []sleeper, label uint64) bool {
	for _, z := range sleep {
		if z.label == label {
			return true
		}
	}
	return false
}

// node is a state expanded by the search: the choices explored from it,
// in order, with their footprints once taken, and the sleep set they
// start from.
type node struct {
	labels []uint64
	fps    []footprint
	known  []bool
	sleep  []sleeper
}

// childSleep is the sleep set of the state choice k of n leads to, fp
// being the footprint of that choice: the choices asleep at n and those
// explored from n before it, that are independent of it.
func (n *node) childSleep(k int, fp footprint) []sleeper {
	var out []sleeper
	for _, z := range n.sleep {
		if !z.fp.conflicts(fp) {
			out = append(out, z)
		}
	}
	for j := range k {
		if n.known[j] && !n.fps[j].conflicts(fp) {
			out = append(out, sleeper{label: n.labels[j], fp: n.fps[j]})
		}
	}
	return out
}

// keepAsleep is what of sleep stays asleep at a state that prev tells was
// expanded before: a choice explored from it already, at a step no
// greater, is awake again for the choices taken from it now (the sleep set
// of a revisited state is intersected with the one it was expanded with,
// as Godefroid's algorithm does with state caching). A sleeper that names
// no choice of the state is dropped.
func (s *System) keepAsleep(sleep []sleeper, prev []explored, step int, rename func(string) string) []sleeper {
	if len(sleep) == 0 || s.sc.Off&SleepSets != 0 {
		return nil
	}
	all := s.labels(s.allOptions())
	var out []sleeper
	for _, z := range sleep {
		for _, l := range all {
			if l.concrete == z.label {
				if exploredAt(prev, labelHash(rename(l.text))) > step {
					out = append(out, z)
				}
				break
			}
		}
	}
	return out
}

// explored is a choice explored from a state, by its label in the state's
// canonical names, and the smallest step it was explored at.
type explored struct {
	label uint64
	step  int32
}

func exploredAt(es []explored, label uint64) int {
	for _, e := range es {
		if e.label == label {
			return int(e.step)
		}
	}
	return math.MaxInt
}

func setExplored(es []explored, label uint64, step int) []explored {
	for i := range es {
		if es[i].label == label {
			es[i].step = int32(step)
			return es
		}
	}
	return append(es, explored{label: label, step: int32(step)})
}

// label names a choice independently of the execution that reached it:
// text describes it with revisions by their ranks, concrete is the hash of
// text, and canon that of text with the Machines renamed as the state's
// digest names them.
type label struct {
	text            string
	concrete, canon uint64
}

// labels names the choices of a state. Choices that would have one text
// (two equal writes held back) are told apart by their order.
func (s *System) labels(opts []choice) []label {
	out := make([]label, len(opts))
	count := map[string]int{}
	for i, c := range opts {
		t := s.labelText(c)
		if n := count[t]; n > 0 {
			count[t]++
			t += "#" + strconv.Itoa(n)
		} else {
			count[t] = 1
		}
		out[i] = label{text: t, concrete: labelHash(t)}
	}
	return out
}

func (s *System) labelText(c choice) string {
	switch {
	case c.event != nil:
		return "event " + c.event.name
	case c.lateI > 0:
		r := s.late[c.lateI-1]
		return "late " + r.Actor + " " + s.canonical(r)
	case c.p.branch != nil:
		return c.p.branch.actor + " branch " + c.p.branch.what + " " + strconv.Itoa(c.way)
	case c.p.view != nil:
		v := s.viewVersions(c.p.view)[c.ver]
		return c.p.view.actor + " view " + c.p.view.key.String() + " #" + strconv.Itoa(s.store.Rank(c.p.view.key, v.RV))
	}
	return c.p.req.Actor + " " + s.canonical(c.p.req) + " " + strconv.Itoa(int(c.out))
}

// labelHash is FNV-1a.
func labelHash(s string) uint64 {
	h := uint64(14695981039346656037)
	for i := 0; i < len(s); i++ {
		h ^= uint64(s[i])
		h *= 1099511628211
	}
	return h
}
