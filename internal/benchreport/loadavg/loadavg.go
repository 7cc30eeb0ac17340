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
	// Others is the share of the machine's CPU time, from 0 to 1, that
	// processes outside the benchmark's own process tree (the test binary
	// and the control plane it started) used while it ran.
	Others = "others-cpu"
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

// Record reads the load average and the CPU times now and returns a
// function that reads them again and reports, as metrics of b, both load
// averages, the number of cores and the share of the CPU that other
// processes used meanwhile. Call it at the start of a benchmark and defer
// the function it returns:
//
//	defer loadavg.Record(b)()
//
// The load average counts the benchmark's own work: its control plane and
// its clients keep two cores busy on their own. The share of the others
// tells whether something else competed with it.
func Record(b *testing.B) func() {
	before, ok := Read()
	cpu0, cpuErr := readCPU()
	return func() {
		after, ok2 := Read()
		if !ok || !ok2 {
			return
		}
		b.ReportMetric(before, Before)
		b.ReportMetric(after, After)
		b.ReportMetric(float64(runtime.NumCPU()), Cores)
		if cpuErr != nil {
			return
		}
		if cpu1, err := readCPU(); err == nil {
			b.ReportMetric(othersShare(cpu0, cpu1), Others)
		}
	}
}

// CompetedShare is the share of the CPU other processes may use during a
// run before the report says they competed with it.
const CompetedShare = 0.2

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
