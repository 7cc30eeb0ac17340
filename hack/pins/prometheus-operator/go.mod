module github.com/initlock/initlock/hack/prometheus-operator

go 1.26

// The Prometheus Operator, for its CRDs (example/prometheus-operator-crd):
// test/release validates monitoring.yaml against the ServiceMonitor and
// PrometheusRule CRDs of this version. Nothing is built from it.
require github.com/prometheus-operator/prometheus-operator v0.85.0
