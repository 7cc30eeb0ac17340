package lock

import (
	"fmt"
	"testing"
	"time"

	"k8s.io/client-go/tools/events"

	"github.com/prometheus/client_golang/prometheus/testutil"
	corev1 "k8s.io/api/core/v1"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/initlock/initlock/internal/kubeenv"
)

func TestEventBudget(t *testing.T) {
	registerMetrics()
	clk := clocktesting.NewFakePassiveClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	next := &kubeenv.Recorder{}
	b := NewEventBudget(next, 1, 2, clk)
	cm := &corev1.ConfigMap{}
	dropped0 := testutil.ToFloat64(eventsDroppedTotal.WithLabelValues("LockAdopted"))
	emit := func(eventtype, reason string) { b.Eventf(cm, nil, eventtype, reason, "Adopt", "note") }

	for range 3 {
		emit(corev1.EventTypeNormal, "LockAdopted")
	}
	emit(corev1.EventTypeWarning, "CorruptLock") // over the budget, emitted
	clk.SetTime(clk.Now().Add(time.Second))
	emit(corev1.EventTypeNormal, "LockAdopted") // one token back
	emit(corev1.EventTypeNormal, "LockAdopted")

	want := []string{"Normal/LockAdopted", "Normal/LockAdopted", "Warning/CorruptLock", "Normal/LockAdopted"}
	if got := next.TypedReasons(); fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("emitted %v, want %v", got, want)
	}
	if d := testutil.ToFloat64(eventsDroppedTotal.WithLabelValues("LockAdopted")) - dropped0; d != 2 {
		t.Errorf("initlock_events_dropped_total{reason=LockAdopted} rose by %g, want 2", d)
	}

	if got := NewEventBudget(next, 0, 2, clk); got != events.EventRecorder(next) {
		t.Errorf("a qps of 0 wraps the recorder (%T), want it as it is", got)
	}
}
