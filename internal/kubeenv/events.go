package kubeenv

import (
	"fmt"
	"slices"
	"sync"

	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/recorder"
)

// Event is an event a Recorder was given: its type (Normal or Warning),
// reason, the object it is about, and its note with the arguments
// formatted in.
type Event struct {
	Type, Reason string
	Regarding    runtime.Object
	Note         string
}

// Recorder records the events it is given, in order, for a test to
// compare. It is an event recorder of client-go's events API (and so an
// events.EventRecorder), safe for use by several goroutines.
type Recorder struct {
	mu     sync.Mutex
	events []Event
}

var _ recorder.EventRecorder = (*Recorder)(nil)

// Eventf records an event.
func (r *Recorder) Eventf(regarding, _ runtime.Object, eventtype, reason, _, note string, args ...any) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.events = append(r.events, Event{Type: eventtype, Reason: reason, Regarding: regarding, Note: fmt.Sprintf(note, args...)})
}

// AnnotatedEventf records an event as Eventf does; the annotations are
// not kept.
func (r *Recorder) AnnotatedEventf(regarding, related runtime.Object, _ map[string]string, eventtype, reason, action, note string, args ...any) {
	r.Eventf(regarding, related, eventtype, reason, action, note, args...)
}

// Events returns the events recorded so far.
func (r *Recorder) Events() []Event {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.events)
}

// Reasons returns the reasons of the events recorded so far.
func (r *Recorder) Reasons() []string {
	return r.strings(func(e Event) string { return e.Reason })
}

// TypedReasons returns the events recorded so far, each written
// "type/reason".
func (r *Recorder) TypedReasons() []string {
	return r.strings(func(e Event) string { return e.Type + "/" + e.Reason })
}

func (r *Recorder) strings(f func(Event) string) []string {
	events := r.Events()
	out := make([]string, len(events))
	for i, e := range events {
		out[i] = f(e)
	}
	return out
}
