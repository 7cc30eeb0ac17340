package explore

import (
	"fmt"
	"slices"
	"strings"
)

// symmetry is the group of permutations of interchangeable Machines: those
// whose providers have one script, one provider each, that no fault
// pattern and no upstream holder names. Renaming such Machines everywhere
// (keys, UIDs, tokens, actors, JSON) maps every execution to an execution,
// every violation to one of the same invariant and length, so that the
// search needs to expand only one state of each orbit.
type symmetry struct {
	// names are the interchangeable Machines; perms the renamings, each
	// giving the new name of names[i] at index i (the identity first).
	names []string
	perms [][]string
	index map[string]int
}

// newSymmetry finds sc's interchangeable Machines; nil when there are none.
func newSymmetry(sc *Scenario) *symmetry {
	if sc.Off&Symmetry != 0 {
		return nil
	}
	groups := map[string][]string{}
	var sigs []string
	for _, m := range sc.machines() {
		sig, ok := sc.script(m)
		if !ok {
			continue
		}
		if groups[sig] == nil {
			sigs = append(sigs, sig)
		}
		groups[sig] = append(groups[sig], m)
	}
	sy := &symmetry{index: map[string]int{}}
	var perGroup [][][]string
	for _, sig := range sigs {
		g := groups[sig]
		if len(g) < 2 {
			continue
		}
		for _, m := range g {
			sy.index[m] = len(sy.names)
			sy.names = append(sy.names, m)
		}
		perGroup = append(perGroup, permutations(g))
	}
	if len(sy.names) == 0 {
		return nil
	}
	sy.perms = [][]string{nil}
	for _, gp := range perGroup {
		var next [][]string
		for _, p := range sy.perms {
			for _, q := range gp {
				next = append(next, append(slices.Clone(p), q...))
			}
		}
		sy.perms = next
	}
	return sy
}

// script is the signature of the provider of Machine m, when m is
// interchangeable with the Machines of the same signature: it has one
// provider, of the Machine's own name, named by no fault pattern and not
// the upstream holder, and its name is one token (letters and digits).
func (sc *Scenario) script(m string) (string, bool) {
	if m == sc.UpstreamHolder || !isToken(m) {
		return "", false
	}
	var ps []Provider
	for _, p := range sc.Providers {
		if p.Machine == m {
			ps = append(ps, p)
		}
	}
	if len(ps) != 1 || (ps[0].Name != "" && ps[0].Name != m) {
		return "", false
	}
	for _, f := range sc.FaultsOn {
		if parts := strings.Fields(f); len(parts) != 3 || parts[0] == ps[0].actor() {
			return "", false
		}
	}
	p := ps[0]
	return fmt.Sprintf("%d/%v/%d/%d", p.Attempts, p.Unlock, p.ViewDepth, p.Incarnation), true
}

func isToken(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		if !isAlnum(s[i]) {
			return false
		}
	}
	return true
}

func isAlnum(c byte) bool {
	return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9'
}

// permutations lists the orders of xs, xs itself first.
func permutations(xs []string) [][]string {
	if len(xs) <= 1 {
		return [][]string{slices.Clone(xs)}
	}
	var out [][]string
	for i := range xs {
		rest := append(slices.Clone(xs[:i]), xs[i+1:]...)
		for _, p := range permutations(rest) {
			out = append(out, append([]string{xs[i]}, p...))
		}
	}
	// xs itself first: the identity.
	for i, p := range out {
		if slices.Equal(p, xs) {
			out[0], out[i] = out[i], out[0]
		}
	}
	return out
}

// rename rewrites every token of text (a maximal run of letters and
// digits) that is an interchangeable Machine's name as permutation p
// renames it.
func (sy *symmetry) rename(p int, text string) string {
	if p == 0 {
		return text
	}
	perm := sy.perms[p]
	var b []byte
	last := 0
	for i := 0; i < len(text); {
		if !isAlnum(text[i]) {
			i++
			continue
		}
		j := i
		for j < len(text) && isAlnum(text[j]) {
			j++
		}
		if k, ok := sy.index[text[i:j]]; ok && perm[k] != text[i:j] {
			if b == nil {
				b = make([]byte, 0, len(text))
			}
			b = append(b, text[last:i]...)
			b = append(b, perm[k]...)
			last = j
		}
		i = j
	}
	if b == nil {
		return text
	}
	return string(append(b, text[last:]...))
}
