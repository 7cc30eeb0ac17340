package lock

import (
	"fmt"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/initlock/initlock/pkg/initlock"
)

// recorded keeps the reasons of the events it is given.
type recorded struct{ reasons []string }

func (r *recorded) Eventf(_, _ runtime.Object, eventtype, reason, _, _ string, _ ...any) {
	r.reasons = append(r.reasons, eventtype+"/"+reason)
}

func TestEventBudget(t *testing.T) {
	registerMetrics()
	clk := clocktesting.NewFakePassiveClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	next := &recorded{}
	b := NewEventBudget(next, 1, 2, clk)
	cm := &corev1.ConfigMap{}
	dropped0 := testutil.ToFloat64(eventsDroppedTotal.WithLabelValues(initlock.EventLockAdopted))
	emit := func(eventtype, reason string) { b.Eventf(cm, nil, eventtype, reason, "Adopt", "note") }

	for range 3 {
		emit(corev1.EventTypeNormal, initlock.EventLockAdopted)
	}
	emit(corev1.EventTypeWarning, ReasonCorruptLock) // over the budget, emitted
	clk.SetTime(clk.Now().Add(time.Second))
	emit(corev1.EventTypeNormal, initlock.EventLockAdopted) // one token back
	emit(corev1.EventTypeNormal, initlock.EventLockAdopted)

	want := []string{"Normal/LockAdopted", "Normal/LockAdopted", "Warning/CorruptLock", "Normal/LockAdopted"}
	if fmt.Sprint(next.reasons) != fmt.Sprint(want) {
		t.Errorf("emitted %v, want %v", next.reasons, want)
	}
	if d := testutil.ToFloat64(eventsDroppedTotal.WithLabelValues(initlock.EventLockAdopted)) - dropped0; d != 2 {
		t.Errorf("initlock_events_dropped_total{reason=LockAdopted} rose by %g, want 2", d)
	}

	if got := NewEventBudget(next, 0, 2, clk); got != initlock.EventRecorder(next) {
		t.Errorf("a qps of 0 wraps the recorder (%T), want it as it is", got)
	}
}
