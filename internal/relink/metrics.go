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
	// LinkedMetric counts the objects relinked to all their recorded
	// owners, by group and kind.
	LinkedMetric = "initlock_relink_linked_objects_total"
)

type metrics struct {
	waiting *prometheus.GaugeVec
	linked  *prometheus.CounterVec
}

func newMetrics(reg prometheus.Registerer, kinds []*kind) (*metrics, error) {
	m := &metrics{
		waiting: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: WaitingMetric,
			Help: "Objects restored without their owners that wait for an owner to be restored.",
		}, []string{"group", "kind"}),
		linked: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: LinkedMetric,
			Help: "Restored objects relinked to all their recorded owners.",
		}, []string{"group", "kind"}),
	}
	for _, c := range []prometheus.Collector{m.waiting, m.linked} {
		if err := reg.Register(c); err != nil {
			if are := (prometheus.AlreadyRegisteredError{}); errors.As(err, &are) {
				return nil, fmt.Errorf("the relinker's metrics are already registered: run one relinker per registry: %w", err)
			}
			return nil, err
		}
	}
	for _, k := range kinds {
		m.waiting.WithLabelValues(k.gvk.Group, k.gvk.Kind).Set(0)
		m.linked.WithLabelValues(k.gvk.Group, k.gvk.Kind).Add(0)
	}
	return m, nil
}
