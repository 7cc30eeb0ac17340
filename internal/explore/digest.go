package explore

import (
	"bytes"
	"crypto/sha256"
	"fmt"
	"io"
	"slices"
	"sort"
	"strconv"
	"strings"

	apierrors "k8s.io/apimachinery/pkg/api/errors"

	"github.com/initlock/initlock/internal/kubeenv/apimodel"
)

// actorHistory is what an actor was told, with revisions named by their
// ranks (apimodel.Store.Rank): its closed rounds of requests, and the
// answers of its open round, which its code may receive in any order.
// Each round is a set: its answers are sorted when it is described, after
// any renaming.
type actorHistory struct {
	closed [][]string
	// sorted describes the closed rounds without renaming.
	sorted strings.Builder
	round  int
	open   []string
}

func (h *actorHistory) add(round int, what string) {
	if round != h.round {
		h.close()
		h.round = round
	}
	h.open = append(h.open, what)
}

func (h *actorHistory) close() {
	if len(h.open) == 0 {
		return
	}
	h.closed = append(h.closed, h.open)
	h.sorted.WriteString(roundText(h.open, nil))
	h.sorted.WriteByte('\n')
	h.open = nil
}

// text describes the history, its texts renamed by rename (nil: none).
func (h *actorHistory) text(rename func(string) string) string {
	if rename == nil {
		return h.sorted.String() + " " + roundText(h.open, nil)
	}
	var b strings.Builder
	for _, r := range h.closed {
		b.WriteString(roundText(r, rename))
		b.WriteByte('\n')
	}
	b.WriteByte(' ')
	b.WriteString(roundText(h.open, rename))
	return b.String()
}

func roundText(r []string, rename func(string) string) string {
	r = slices.Clone(r)
	if rename != nil {
		for i := range r {
			r[i] = rename(r[i])
		}
	}
	sort.Strings(r)
	return strings.Join(r, "|")
}

// record adds what an actor was told to its history.
func (s *System) record(p *pending, c choice) {
	var actor, what string
	switch {
	case p.branch != nil:
		actor, what = p.branch.actor, fmt.Sprintf("branch %s=%d", p.branch.what, c.way)
	case p.view != nil:
		actor, what = p.view.actor, fmt.Sprintf("view %s #%d", p.view.key, s.store.Rank(p.view.key, p.view.chosen.RV))
	default:
		actor, what = p.req.Actor, s.canonical(p.req)+" -> "+s.canonicalAnswer(p.req)
	}
	h := s.history[actor]
	if h == nil {
		h = &actorHistory{}
		s.history[actor] = h
	}
	h.add(p.round, what)
}

// canonical describes a request with the revisions it names (a merge
// patch's resourceVersion, a delete's precondition) replaced by their
// ranks.
func (s *System) canonical(r *apimodel.Request) string {
	body := r.Body
	for _, marker := range []string{`"resourceVersion":"`, "rv="} {
		i := strings.Index(body, marker)
		if i < 0 {
			continue
		}
		j := i + len(marker)
		k := j
		for k < len(body) && body[k] >= '0' && body[k] <= '9' {
			k++
		}
		rv, _ := strconv.ParseInt(body[j:k], 10, 64)
		body = body[:j] + "#" + strconv.Itoa(s.store.Rank(r.Key, rv)) + body[k:]
	}
	return r.Verb + " " + r.Key.String() + " " + body
}

func (s *System) canonicalAnswer(r *apimodel.Request) string {
	if r.Err != nil {
		if st, ok := r.Err.(apierrors.APIStatus); ok {
			return fmt.Sprintf("%d %s", st.Status().Code, st.Status().Reason)
		}
		return r.Err.Error()
	}
	if r.Result == nil {
		return "ok"
	}
	meta, _ := r.Result["metadata"].(map[string]any)
	rv, _ := strconv.ParseInt(fmt.Sprint(meta["resourceVersion"]), 10, 64)
	return fmt.Sprintf("ok #%d", s.store.Rank(r.Key, rv))
}

// stateKey is a state's digest.
type stateKey [16]byte

// section is a part of a state's description: lines in order, or a set of
// lines (sorted, after any renaming). render, when set, gives the lines
// renamed, for lines whose parts are sets themselves.
type section struct {
	set    bool
	lines  []string
	render func(rename func(string) string) []string
}

// digest digests the state: the store, what is pending and held back, what
// each actor was told (in any order within a round of requests it issued
// together), the budgets, the caches' floors and the checker's state,
// every revision named by its rank. Two executions that reach the same
// digest have the same futures. With interchangeable Machines, the digest
// is the smallest over their renamings, and rename maps the texts of the
// state's choices to the names that digest gives them.
func (s *System) digest() (key stateKey, rename func(string) string) {
	secs := s.sections()
	if s.sym == nil {
		return digestOf(secs, nil), func(l string) string { return l }
	}
	best := -1
	for p := range s.sym.perms {
		k := digestOf(secs, func(l string) string { return s.sym.rename(p, l) })
		if best < 0 || bytes.Compare(k[:], key[:]) < 0 {
			key, best = k, p
		}
	}
	return key, func(l string) string { return s.sym.rename(best, l) }
}

func digestOf(secs []section, rename func(string) string) stateKey {
	h := sha256.New()
	var lines []string
	for _, sec := range secs {
		switch {
		case sec.render != nil:
			lines = sec.render(rename)
		case rename != nil:
			lines = lines[:0]
			for _, l := range sec.lines {
				lines = append(lines, rename(l))
			}
		default:
			lines = append(lines[:0], sec.lines...)
		}
		if sec.set {
			sort.Strings(lines)
		}
		for _, l := range lines {
			io.WriteString(h, l)
			h.Write([]byte{'\n'})
		}
		h.Write([]byte{0})
	}
	var k stateKey
	copy(k[:], h.Sum(nil))
	return k
}

// sections describes the state.
func (s *System) sections() []section {
	store := section{set: true, lines: s.store.FingerprintLines(s.maxViewDepth()+1, s.sym != nil)}
	pend := section{set: true}
	for _, p := range s.gate.pending {
		if p.req != nil {
			pend.lines = append(pend.lines, p.req.Actor+" "+s.canonical(p.req))
		} else {
			pend.lines = append(pend.lines, pendingKey(p))
		}
	}
	var late section
	for _, l := range s.late {
		late.lines = append(late.lines, "late "+l.Actor+" "+s.canonical(l))
	}
	hist := section{set: true, render: func(rename func(string) string) []string {
		var lines []string
		for a, h := range s.history {
			if rename != nil {
				a = rename(a)
			}
			lines = append(lines, a+" "+h.text(rename))
		}
		return lines
	}}
	floors := section{set: true}
	for a, fs := range s.floors {
		for k, rv := range fs {
			floors.lines = append(floors.lines, fmt.Sprintf("floor %s %s #%d", a, k, s.store.Rank(k, rv)))
		}
	}
	secs := []section{store, pend, late, hist, {lines: []string{fmt.Sprintf("%+v", s.budget)}}, floors}
	for _, part := range s.checker.stateParts() {
		secs = append(secs, section{set: true, lines: part})
	}
	return secs
}
