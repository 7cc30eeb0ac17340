package loadavg

import (
	"os"
	"runtime"
	"strconv"
	"strings"
	"testing"
)

// Metric units a benchmark reports through Record.
const (
	Before = "load-before"
	After  = "load-after"
	Cores  = "cores"
)

// Read returns the one-minute load average, and false when the system does
// not tell it.
func Read() (float64, bool) {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return 0, false
	}
	f := strings.Fields(string(b))
	if len(f) == 0 {
		return 0, false
	}
	v, err := strconv.ParseFloat(f[0], 64)
	return v, err == nil
}

// Record reads the load average now and returns a function that reads it
// again and reports both, with the number of cores, as metrics of b. Call
// it at the start of a benchmark and defer the function it returns:
//
//	defer loadavg.Record(b)()
func Record(b *testing.B) func() {
	before, ok := Read()
	return func() {
		after, ok2 := Read()
		if !ok || !ok2 {
			return
		}
		b.ReportMetric(before, Before)
		b.ReportMetric(after, After)
		b.ReportMetric(float64(runtime.NumCPU()), Cores)
	}
}

// Busy tells whether a run whose metrics are m ran on a machine busier
// than it has cores, at its start or at its end. Runs without the metrics
// are not busy.
func Busy(m map[string]float64) bool {
	cores, ok := m[Cores]
	if !ok || cores <= 0 {
		return false
	}
	return m[Before] > cores || m[After] > cores
}
