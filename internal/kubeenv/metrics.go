package kubeenv

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"strconv"
	"strings"

	"k8s.io/client-go/kubernetes"
)

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
	cs, err := kubernetes.NewForConfig(e.Config)
	if err != nil {
		return nil, err
	}
	raw, err := cs.RESTClient().Get().AbsPath("/metrics").DoRaw(ctx)
	if err != nil {
		return nil, fmt.Errorf("reading the API server's metrics: %w", err)
	}
	const metric = "apiserver_admission_controller_admission_duration_seconds_"
	times := map[string]AdmissionTime{}
	sc := bufio.NewScanner(bytes.NewReader(raw))
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		rest, ok := strings.CutPrefix(line, metric)
		if !ok || !strings.Contains(rest, `name="`+plugin+`"`) || !strings.Contains(rest, `type="validate"`) {
			continue
		}
		kind, labels, ok := strings.Cut(rest, "{")
		if !ok || (kind != "sum" && kind != "count") {
			continue
		}
		_, op, _ := strings.Cut(labels, `operation="`)
		op, _, _ = strings.Cut(op, `"`)
		_, value, _ := strings.Cut(labels, "} ")
		v, err := strconv.ParseFloat(strings.TrimSpace(value), 64)
		if err != nil {
			return nil, fmt.Errorf("reading %s: %w", line, err)
		}
		t := times[op]
		if kind == "sum" {
			t.Seconds += v
		} else {
			t.Requests += v
		}
		times[op] = t
	}
	return times, sc.Err()
}
