package explore

import (
	"crypto/sha256"
	"fmt"
	"io"
	"slices"
	"sort"
	"strconv"
	"strings"

	apierrors "k8s.io/apimachinery/pkg/api/errors"

	"github.com/initlock/initlock/internal/kubeenv/apimodel"
	"github.com/initlock/initlock/internal/kubeenv/wire"
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
	h.sorted.WriteString(roundText(h.open))
	h.sorted.WriteByte('\n')
	h.open = nil
}

// text describes the history.
func (h *actorHistory) text() string {
	return h.sorted.String() + " " + roundText(h.open)
}

func roundText(r []string) string {
	r = slices.Clone(r)
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
// lines (sorted, after any renaming). hist, for the actors' histories
// when Machines may be renamed, holds them as rounds of answers, each a
// set itself.
type section struct {
	set   bool
	lines []string
	hist  []histLine
}

type histLine struct {
	actor  string
	rounds [][]string
}

// digest digests the state: the store, what is pending and held back, what
// each actor was told (in any order within a round of requests it issued
// together), the budgets, the caches' floors and the checker's state,
// every revision named by its rank. Two executions that reach the same
// digest have the same futures. With interchangeable Machines, the digest
// is the canonical one of the state's orbit (symmetry.canonical), and
// rename maps the texts of the state's choices to the names it gives them.
func (s *System) digest() (key stateKey, rename func(string) string) {
	if s.sym == nil {
		return digestOf(s.sections(false)), func(l string) string { return l }
	}
	key, names := s.sym.canonical(s.sections(true))
	return key, func(l string) string { return s.sym.rename(names, l) }
}

func digestOf(secs []section) stateKey {
	h := sha256.New()
	for _, sec := range secs {
		hashSection(h, sec.lines, sec.set)
	}
	var k stateKey
	copy(k[:], h.Sum(nil))
	return k
}

// hashSection writes one section's lines into h, sorted when they are a
// set, each ended by a newline and the section by a zero byte.
func hashSection(h io.Writer, lines []string, set bool) {
	if set {
		sort.Strings(lines)
	}
	for _, l := range lines {
		_, _ = io.WriteString(h, l)
		_, _ = h.Write([]byte{'\n'})
	}
	_, _ = h.Write([]byte{0})
}

// sections describes the state; with rounds, the histories as rounds.
func (s *System) sections(rounds bool) []section {
	store := section{set: true, lines: s.store.FingerprintLines(s.maxViewDepth()+1, rounds)}
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
	hist := section{set: true}
	for a, h := range s.history {
		if rounds {
			hist.hist = append(hist.hist, histLine{actor: a, rounds: append(slices.Clone(h.closed), h.open)})
		} else {
			hist.lines = append(hist.lines, a+" "+h.text())
		}
	}
	floors := section{set: true}
	for a, fs := range s.floors {
		for k, rv := range fs {
			floors.lines = append(floors.lines, fmt.Sprintf("floor %s %s #%d", a, k, s.store.Rank(k, rv)))
		}
	}
	secs := []section{store, pend, late, hist, {lines: []string{fmt.Sprintf("%+v", s.budget)}}, floors, s.registers()}
	for _, part := range s.checker.stateParts() {
		secs = append(secs, section{set: true, lines: part})
	}
	return append(secs, section{set: true, lines: s.adversaryState()})
}

// registers are the values the grant register has held, which the store's
// fingerprint may no longer show and the adversary may revert it to.
func (s *System) registers() section {
	sec := section{set: true}
	if !slices.Contains(s.sc.Adversary, RevertRegister) {
		return sec
	}
	seen := map[string]bool{}
	for _, v := range s.store.History(clusterKey) {
		if v.Object == nil {
			continue
		}
		meta, _ := v.Object["metadata"].(map[string]any)
		ann, _ := meta["annotations"].(map[string]any)
		val, _ := ann[wire.GrantAnnotation].(string)
		line := fmt.Sprintf("register %v %s", meta["uid"], val)
		if !seen[line] {
			seen[line] = true
			sec.lines = append(sec.lines, line)
		}
	}
	return sec
}
