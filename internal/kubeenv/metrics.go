package kubeenv

import (
	"bytes"
	"context"
	"fmt"
	"io"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	"k8s.io/client-go/kubernetes"
)

// Metrics are a /metrics page's metric families, by name, as Prometheus's
// own text parser reads them.
type Metrics map[string]*dto.MetricFamily

// ParseMetrics reads a page of metrics in Prometheus's text format.
func ParseMetrics(r io.Reader) (Metrics, error) {
	p := expfmt.NewTextParser(model.UTF8Validation)
	families, err := p.TextToMetricFamilies(r)
	if err != nil {
		return nil, fmt.Errorf("reading metrics: %w", err)
	}
	return families, nil
}

// Each calls f with the labels of every sample of the family name, and the
// sample (for a histogram, its sum and count are the sample's Histogram).
func (m Metrics) Each(name string, f func(labels map[string]string, sample *dto.Metric)) {
	for _, s := range m[name].GetMetric() {
		labels := make(map[string]string, len(s.GetLabel()))
		for _, l := range s.GetLabel() {
			labels[l.GetName()] = l.GetValue()
		}
		f(labels, s)
	}
}

// Metrics reads the API server's own metrics. They count every client's
// requests, the control plane's own among them; the read is one request.
func (e *Env) Metrics(ctx context.Context) (Metrics, error) {
	cs, err := kubernetes.NewForConfig(e.Config)
	if err != nil {
		return nil, err
	}
	raw, err := cs.RESTClient().Get().AbsPath("/metrics").DoRaw(ctx)
	if err != nil {
		return nil, fmt.Errorf("reading the API server's metrics: %w", err)
	}
	return ParseMetrics(bytes.NewReader(raw))
}

// AdmissionTime is the time an admission plugin of the API server spent on
// the requests of one operation, and how many requests it saw: the
// apiserver_admission_controller_admission_duration_seconds histogram's sum
// and count, over its rejected and admitted requests.
type AdmissionTime struct {
	Seconds  float64
	Requests float64
}

// Sub is the time and requests between an earlier reading and t.
func (t AdmissionTime) Sub(earlier AdmissionTime) AdmissionTime {
	return AdmissionTime{Seconds: t.Seconds - earlier.Seconds, Requests: t.Requests - earlier.Requests}
}

// AdmissionTimes reads the API server's metrics and returns the time
// admission plugin (e.g. ValidatingAdmissionPolicy) spent validating the
// requests of each operation (CREATE, UPDATE, DELETE) since it started.
// The histogram counts every resource's requests: those of the test and
// any the control plane's own clients make meanwhile.
func (e *Env) AdmissionTimes(ctx context.Context, plugin string) (map[string]AdmissionTime, error) {
	m, err := e.Metrics(ctx)
	if err != nil {
		return nil, err
	}
	times := map[string]AdmissionTime{}
	m.Each("apiserver_admission_controller_admission_duration_seconds", func(l map[string]string, s *dto.Metric) {
		if l["name"] != plugin || l["type"] != "validate" {
			return
		}
		t := times[l["operation"]]
		t.Seconds += s.GetHistogram().GetSampleSum()
		t.Requests += float64(s.GetHistogram().GetSampleCount())
		times[l["operation"]] = t
	})
	return times, nil
}
