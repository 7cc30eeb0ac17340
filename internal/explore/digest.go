package explore

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"slices"
	"sort"
	"strconv"
	"strings"

	apierrors "k8s.io/apimachinery/pkg/api/errors"

	"github.com/initlock/initlock/internal/kubeenv/apimodel"
)

// actorHistory is what an actor was told, with revisions named by their
// ranks (apimodel.Store.Rank): a digest of its closed rounds of requests,
// and the answers of its open round, which its code may receive in any
// order.
type actorHistory struct {
	digest string
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
	sort.Strings(h.open)
	sum := sha256.Sum256([]byte(h.digest + "\n" + strings.Join(h.open, "|")))
	h.digest, h.open = hex.EncodeToString(sum[:16]), nil
}

func (h *actorHistory) String() string {
	open := slices.Clone(h.open)
	sort.Strings(open)
	return h.digest + " " + strings.Join(open, "|")
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

// hash digests the state: the store, what is pending and held back, what
// each actor was told (in any order within a round of requests it issued
// together), the budgets, the caches' floors and the checker's state,
// every revision named by its rank. Two executions that reach the same
// digest have the same futures.
func (s *System) hash() string {
	h := sha256.New()
	fmt.Fprintln(h, s.store.Fingerprint(s.maxViewDepth()+1))
	keys := make([]string, 0, len(s.gate.pending))
	for _, p := range s.gate.pending {
		if p.req != nil {
			keys = append(keys, p.req.Actor+" "+s.canonical(p.req))
		} else {
			keys = append(keys, pendingKey(p))
		}
	}
	sort.Strings(keys)
	fmt.Fprintln(h, strings.Join(keys, "\n"))
	for _, l := range s.late {
		fmt.Fprintln(h, "late", l.Actor, s.canonical(l))
	}
	actors := make([]string, 0, len(s.history))
	for a := range s.history {
		actors = append(actors, a)
	}
	sort.Strings(actors)
	for _, a := range actors {
		fmt.Fprintln(h, a, s.history[a])
	}
	fmt.Fprintf(h, "%+v\n", s.budget)
	var floors []string
	for a, fs := range s.floors {
		for k, rv := range fs {
			floors = append(floors, fmt.Sprintf("floor %s %s #%d", a, k, s.store.Rank(k, rv)))
		}
	}
	sort.Strings(floors)
	fmt.Fprintln(h, strings.Join(floors, "\n"))
	fmt.Fprintln(h, s.checker.state())
	fmt.Fprintln(h, s.adversaryState())
	return hex.EncodeToString(h.Sum(nil)[:16])
}
