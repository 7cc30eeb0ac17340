package faults

import (
	"errors"
	"fmt"
	"regexp"
	"slices"
	"strings"
)

// Map is one side's mapping: for each class it models, the names of its
// own that inject it (a field, an action, an event, an outcome).
type Map map[Class][]string

// Check tells what is wrong with side s's mapping m: a class of the
// catalogue that m does not map and whose entry does not say why s cannot
// model it, a class m maps that the catalogue says s does not model, a
// class m maps with no name of s's own, and a class that is not in the
// catalogue.
func Check(s Side, m Map) error {
	var errs []error
	for _, e := range catalogue {
		names, mapped := m[e.Class]
		switch {
		case !mapped && e.Models(s):
			errs = append(errs, fmt.Errorf("%s does not map fault class %s (%s): map it, or state in its entry why %s cannot model it",
				s, e.Class, e.Meaning, s))
		case mapped && !e.Models(s):
			errs = append(errs, fmt.Errorf("%s maps fault class %s to %v, which its entry says it does not model: %s",
				s, e.Class, names, e.Unmodelled[s]))
		case mapped && len(names) == 0:
			errs = append(errs, fmt.Errorf("%s maps fault class %s to no name of its own", s, e.Class))
		}
	}
	for c := range m {
		if _, ok := Lookup(c); !ok {
			errs = append(errs, fmt.Errorf("%s maps %q, which is not a fault class of the catalogue", s, c))
		}
	}
	return errors.Join(errs...)
}

// Tally counts faults by class.
type Tally map[Class]int

// Add returns the sum of t and o.
func (t Tally) Add(o Tally) Tally {
	out := Tally{}
	for c, n := range t {
		out[c] += n
	}
	for c, n := range o {
		out[c] += n
	}
	return out
}

// Missing returns the classes side s models that t has not counted, in
// report order.
func (t Tally) Missing(s Side) []Class {
	return slices.DeleteFunc(Modelled(s), func(c Class) bool { return t[c] != 0 })
}

// Format lists the count of every class side s models, in report order,
// as "class=n", then any other class counted.
func (t Tally) Format(s Side) string {
	modelled := Modelled(s)
	var parts, rest []string
	for _, c := range modelled {
		parts = append(parts, fmt.Sprintf("%s=%d", c, t[c]))
	}
	for c, n := range t {
		if !slices.Contains(modelled, c) {
			rest = append(rest, fmt.Sprintf("%s=%d", c, n))
		}
	}
	slices.Sort(rest)
	return strings.Join(append(parts, rest...), " ")
}

// validName is a class name: lower-case words joined by hyphens.
var validName = regexp.MustCompile(`^[a-z]+(-[a-z]+)*$`)

// validate checks the catalogue itself.
func validate(entries []Entry) error {
	var errs []error
	seen := map[Class]bool{}
	groups := []Group{Request, Cache, Object, Process, Work}
	last := 0
	for _, e := range entries {
		if !validName.MatchString(string(e.Class)) {
			errs = append(errs, fmt.Errorf("fault class %q: a name is lower-case words joined by hyphens", e.Class))
		}
		if seen[e.Class] {
			errs = append(errs, fmt.Errorf("fault class %s is declared twice", e.Class))
		}
		seen[e.Class] = true
		if strings.TrimSpace(e.Meaning) == "" || strings.Contains(e.Meaning, "\n") {
			errs = append(errs, fmt.Errorf("fault class %s: its meaning is one line", e.Class))
		}
		g := slices.Index(groups, e.Group)
		switch {
		case g < 0:
			errs = append(errs, fmt.Errorf("fault class %s: unknown group %q", e.Class, e.Group))
		case g < last:
			errs = append(errs, fmt.Errorf("fault class %s: group %s after group %s", e.Class, e.Group, groups[last]))
		default:
			last = g
		}
		modelled := false
		for _, s := range Sides {
			modelled = modelled || e.Models(s)
		}
		if !modelled {
			errs = append(errs, fmt.Errorf("fault class %s: no side models it", e.Class))
		}
		for s, why := range e.Unmodelled {
			if slices.Index(Sides, s) < 0 {
				errs = append(errs, fmt.Errorf("fault class %s: unknown side %q", e.Class, s))
			}
			if strings.TrimSpace(why) == "" {
				errs = append(errs, fmt.Errorf("fault class %s: say why %s does not model it", e.Class, s))
			}
		}
	}
	return errors.Join(errs...)
}
