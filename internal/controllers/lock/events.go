package lock

import (
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/tools/events"
	"k8s.io/client-go/util/flowcontrol"
	"k8s.io/utils/clock"
)

// Defaults of the event budget (see NewEventBudget).
const (
	DefaultEventQPS   float32 = 5
	DefaultEventBurst int     = 100
)

// eventBudget passes every Warning event on, and Normal events while its
// token bucket has a token. Each event is a write to the API server: after
// a restore of thousands of Clusters one LockAdopted event per lock would
// cost as many writes as the healing itself, and fill the events of the
// namespace. The logs and the initlock_lock_* counters record every write
// whether or not its event was emitted.
type eventBudget struct {
	next    events.EventRecorder
	limiter flowcontrol.PassiveRateLimiter
}

// NewEventBudget returns a recorder that emits Normal events through next
// at most qps per second on average, with bursts of burst, and drops the
// rest, counting them in initlock_events_dropped_total. Warning events are
// rare (one per lock and version) and always emitted. A qps of zero or
// less emits every event. clk nil is the real clock.
func NewEventBudget(next events.EventRecorder, qps float32, burst int, clk clock.PassiveClock) events.EventRecorder {
	if qps <= 0 || next == nil {
		return next
	}
	if clk == nil {
		clk = clock.RealClock{}
	}
	return &eventBudget{next: next, limiter: flowcontrol.NewTokenBucketPassiveRateLimiterWithClock(qps, max(burst, 1), clk)}
}

func (b *eventBudget) Eventf(regarding, related runtime.Object, eventtype, reason, action, note string, args ...any) {
	if eventtype != corev1.EventTypeWarning && !b.limiter.TryAccept() {
		eventsDroppedTotal.WithLabelValues(reason).Inc()
		return
	}
	b.next.Eventf(regarding, related, eventtype, reason, action, note, args...)
}
