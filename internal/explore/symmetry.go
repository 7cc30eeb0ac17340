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
	// names are the interchangeable Machines, groups their indexes by
	// script (each group's names sorted).
	names  []string
	groups [][]int
	index  map[string]int
	// templates caches template's answers: states share most of their
	// lines.
	templates map[string]templated
}

type templated struct {
	text  string
	names uint64
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
	sy := &symmetry{index: map[string]int{}, templates: map[string]templated{}}
	for _, sig := range sigs {
		g := groups[sig]
		if len(g) < 2 {
			continue
		}
		var idx []int
		for _, m := range g {
			sy.index[m] = len(sy.names)
			idx = append(idx, len(sy.names))
			sy.names = append(sy.names, m)
		}
		sy.groups = append(sy.groups, idx)
	}
	if len(sy.names) == 0 {
		return nil
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
	// Every field of the script but the Machine's name, so that a field
	// added to Provider tells scripts apart without more code here.
	p := ps[0]
	p.Machine, p.Name = "", ""
	return fmt.Sprintf("%+v", p), true
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

// permutations lists the orders of xs.
func permutations(xs []int) [][]int {
	if len(xs) <= 1 {
		return [][]int{slices.Clone(xs)}
	}
	var out [][]int
	for i := range xs {
		rest := append(slices.Clone(xs[:i]), xs[i+1:]...)
		for _, p := range permutations(rest) {
			out = append(out, append([]int{xs[i]}, p...))
		}
	}
	return out
}

// template replaces every token of text (a maximal run of letters and
// digits) that is an interchangeable Machine's name by its marker, and
// tells which Machines it names (a bit each).
func (sy *symmetry) template(text string) (string, uint64) {
	if t, ok := sy.templates[text]; ok {
		return t.text, t.names
	}
	t, names := sy.templateOf(text)
	if len(sy.templates) >= 1<<16 {
		clear(sy.templates)
	}
	sy.templates[text] = templated{t, names}
	return t, names
}

func (sy *symmetry) templateOf(text string) (string, uint64) {
	var b []byte
	var names uint64
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
		if k, ok := sy.index[text[i:j]]; ok {
			if b == nil {
				b = make([]byte, 0, len(text)+8)
			}
			b = append(b, text[last:i]...)
			b = append(b, 1, byte('0'+k))
			names |= 1 << k
			last = j
		}
		i = j
	}
	if b == nil {
		return text, 0
	}
	return string(append(b, text[last:]...)), names
}

// fill writes template t with the Machine of index k named names[k].
func fill(b []byte, t string, names []string) []byte {
	for {
		i := strings.IndexByte(t, 1)
		if i < 0 {
			return append(b, t...)
		}
		b = append(b, t[:i]...)
		b = append(b, names[t[i+1]-'0']...)
		t = t[i+2:]
	}
}

// rename renames the Machines of text: the one of index k to names[k].
func (sy *symmetry) rename(names []string, text string) string {
	t, n := sy.template(text)
	if n == 0 {
		return text
	}
	return string(fill(nil, t, names))
}
