package explore

import (
	"bytes"
	"crypto/sha256"
	"slices"
	"sort"
	"strconv"
	"strings"
)

// canonical is the digest of the orbit of the state secs describes: the
// smallest digest of its renamings that name the interchangeable Machines
// in the order of their signatures, and that renaming (names[k] is the
// new name of the Machine of index k).
//
// A Machine's signature digests the lines that name it, with its name
// written "@" and those of the other interchangeable Machines "?": it is
// the same for a Machine and its image in a renamed state. So the
// renamings tried for a state and for its image give the same texts, and
// the smallest digest is the orbit's. Machines of equal signatures are
// tried in every order among themselves.
func (sy *symmetry) canonical(secs []section) (stateKey, []string) {
	n := len(sy.names)
	var tsecs []section
	masks := make([][]uint64, len(secs))
	for i, sec := range secs {
		ts := section{set: sec.set}
		for _, l := range sec.lines {
			t, m := sy.template(l)
			ts.lines = append(ts.lines, t)
			masks[i] = append(masks[i], m)
		}
		for _, hl := range sec.hist {
			a, m := sy.template(hl.actor)
			th := histLine{actor: a}
			for _, r := range hl.rounds {
				tr := make([]string, len(r))
				for j, e := range r {
					var em uint64
					tr[j], em = sy.template(e)
					m |= em
				}
				th.rounds = append(th.rounds, tr)
			}
			ts.hist = append(ts.hist, th)
			masks[i] = append(masks[i], m)
		}
		tsecs = append(tsecs, ts)
	}
	sigs := make([]string, n)
	view := make([]string, n)
	for k := range n {
		for j := range view {
			view[j] = "?"
		}
		view[k] = "@"
		var parts []string
		for i, ts := range tsecs {
			for j, l := range ts.lines {
				if masks[i][j]&(1<<k) != 0 {
					parts = append(parts, strconv.Itoa(i)+" "+string(fill(nil, l, view)))
				}
			}
			for j, hl := range ts.hist {
				if masks[i][len(ts.lines)+j]&(1<<k) != 0 {
					parts = append(parts, strconv.Itoa(i)+" "+renderHist(hl, view))
				}
			}
		}
		sort.Strings(parts)
		sum := sha256.Sum256([]byte(strings.Join(parts, "\n")))
		sigs[k] = string(sum[:])
	}
	var best stateKey
	var bestNames []string
	for _, names := range sy.candidates(sigs) {
		k := renderDigest(tsecs, names)
		if bestNames == nil || bytes.Compare(k[:], best[:]) < 0 {
			best, bestNames = k, names
		}
	}
	return best, bestNames
}

// candidates are the renamings that give each group's names, in order, to
// its Machines sorted by signature, in every order among equal ones.
func (sy *symmetry) candidates(sigs []string) [][]string {
	out := [][]string{slices.Clone(sy.names)}
	for _, g := range sy.groups {
		order := slices.Clone(g)
		sort.SliceStable(order, func(a, b int) bool { return sigs[order[a]] < sigs[order[b]] })
		for start := 0; start < len(order); {
			end := start + 1
			for end < len(order) && sigs[order[end]] == sigs[order[start]] {
				end++
			}
			var next [][]string
			for _, names := range out {
				for _, p := range permutations(order[start:end]) {
					nn := slices.Clone(names)
					for i, k := range p {
						nn[k] = sy.names[g[start+i]]
					}
					next = append(next, nn)
				}
			}
			out, start = next, end
		}
	}
	return out
}

func renderHist(hl histLine, names []string) string {
	b := fill(nil, hl.actor, names)
	for i, r := range hl.rounds {
		if i == len(hl.rounds)-1 {
			b = append(b, ' ')
		}
		es := make([]string, len(r))
		for j, e := range r {
			es[j] = string(fill(nil, e, names))
		}
		sort.Strings(es)
		b = append(b, strings.Join(es, "|")...)
		b = append(b, '\n')
	}
	return string(b)
}

func renderDigest(tsecs []section, names []string) stateKey {
	h := sha256.New()
	var lines []string
	var buf []byte
	for _, ts := range tsecs {
		lines = lines[:0]
		for _, l := range ts.lines {
			buf = fill(buf[:0], l, names)
			lines = append(lines, string(buf))
		}
		for _, hl := range ts.hist {
			lines = append(lines, renderHist(hl, names))
		}
		hashSection(h, lines, ts.set)
	}
	var k stateKey
	copy(k[:], h.Sum(nil))
	return k
}
