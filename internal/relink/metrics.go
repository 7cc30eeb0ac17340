package relink

import (
	"errors"
	"fmt"

	"github.com/prometheus/client_golang/prometheus"
)

// Metric names.
const (
	// WaitingMetric is a gauge of the objects waiting for a recorded owner
	// to be restored, by group and kind.
	WaitingMetric = "initlock_relink_waiting_objects"
	// UnprovenMetric is a gauge of the waiting objects for which an object
	// of a recorded owner's kind and name exists but is not proven to be
	// the backed-up owner (ReasonOwnerNotProven), by group and kind.
	UnprovenMetric = "initlock_relink_unproven_owner_objects"
	// LinkedMetric counts the objects relinked to all their recorded
	// owners, by group and kind.
	LinkedMetric = "initlock_relink_linked_objects_total"
	// ForbiddenMetric counts the relink patches the API server refused for
	// lack of permission, by group and kind of the object patched.
	ForbiddenMetric = "initlock_relink_forbidden_patches_total"
)

type metrics struct {
	waiting  *prometheus.GaugeVec
	unproven *prometheus.GaugeVec
	linked   *prometheus.CounterVec
	// forbidden counts the patches refused with 403 Forbidden.
	forbidden *prometheus.CounterVec
}

func newMetrics(reg prometheus.Registerer, kinds []*kind) (*metrics, error) {
	m := &metrics{
		waiting: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: WaitingMetric,
			Help: "Objects restored without their owners that wait for an owner to be restored.",
		}, []string{"group", "kind"}),
		unproven: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: UnprovenMetric,
			Help: "Restored objects waiting because an object holds a recorded owner's name but is not proven to be the backed-up owner.",
		}, []string{"group", "kind"}),
		linked: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: LinkedMetric,
			Help: "Restored objects relinked to all their recorded owners.",
		}, []string{"group", "kind"}),
		forbidden: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: ForbiddenMetric,
			Help: "Relink patches refused by the API server for lack of permission; a Warning event names the permission.",
		}, []string{"group", "kind"}),
	}
	for _, c := range []prometheus.Collector{m.waiting, m.unproven, m.linked, m.forbidden} {
		if err := reg.Register(c); err != nil {
			if are := (prometheus.AlreadyRegisteredError{}); errors.As(err, &are) {
				return nil, fmt.Errorf("the relinker's metrics are already registered: run one relinker per registry: %w", err)
			}
			return nil, err
		}
	}
	for _, k := range kinds {
		m.waiting.WithLabelValues(k.gvk.Group, k.gvk.Kind).Set(0)
		m.unproven.WithLabelValues(k.gvk.Group, k.gvk.Kind).Set(0)
		m.linked.WithLabelValues(k.gvk.Group, k.gvk.Kind).Add(0)
		m.forbidden.WithLabelValues(k.gvk.Group, k.gvk.Kind).Add(0)
	}
	return m, nil
}
