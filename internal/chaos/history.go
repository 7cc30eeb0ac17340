package chaos

import (
	"fmt"
	"io"
	"strings"
	"sync"
	"time"
)

// Event is one entry of a scenario's history: something an actor did or
// saw.
type Event struct {
	// At is the time since the scenario started.
	At time.Duration
	// Actor did it: "driver", "bc-<n>" (a bootstrap controller),
	// "init/<machine>" (a machine running kubeadm init), "mgr-<n>" (a
	// manager replica, seen through the proxy), "watch" or "check".
	Actor string
	// What happened, in a few fixed words.
	What string
	// Object it happened to.
	Object string
	// RV is the resourceVersion written or seen, when known.
	RV string
	// Detail says more.
	Detail string
}

func (e Event) String() string {
	s := fmt.Sprintf("%8.3fs %-14s %-22s %-26s", e.At.Seconds(), e.Actor, e.What, e.Object)
	if e.RV != "" {
		s += " rv=" + e.RV
	}
	if e.Detail != "" {
		s += " " + e.Detail
	}
	return strings.TrimRight(s, " ")
}

// History is the ordered record of a scenario. It is safe for concurrent
// use.
type History struct {
	start time.Time

	mu     sync.Mutex
	events []Event
}

// NewHistory starts a History now.
func NewHistory() *History { return &History{start: time.Now()} }

// Since is the time elapsed since the History started.
func (h *History) Since() time.Duration { return time.Since(h.start) }

// Add records an event now.
func (h *History) Add(actor, what, object, rv, detail string) Event {
	e := Event{At: h.Since(), Actor: actor, What: what, Object: object, RV: rv, Detail: detail}
	h.mu.Lock()
	h.events = append(h.events, e)
	h.mu.Unlock()
	return e
}

// Addf records an event with a formatted detail.
func (h *History) Addf(actor, what, object, format string, args ...any) Event {
	return h.Add(actor, what, object, "", fmt.Sprintf(format, args...))
}

// Events returns a copy of the events so far.
func (h *History) Events() []Event {
	h.mu.Lock()
	defer h.mu.Unlock()
	return append([]Event(nil), h.events...)
}

// WriteTo writes the history, one event a line.
func (h *History) WriteTo(w io.Writer) (int64, error) {
	var n int64
	for _, e := range h.Events() {
		k, err := fmt.Fprintln(w, e.String())
		n += int64(k)
		if err != nil {
			return n, err
		}
	}
	return n, nil
}
