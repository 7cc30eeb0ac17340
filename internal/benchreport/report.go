package benchreport

import (
	"fmt"
	"io"
	"math"
	"sort"
	"strconv"
	"strings"

	"github.com/initlock/initlock/internal/benchreport/loadavg"
)

// Meta describes the run a report is about.
type Meta struct {
	// Date of the run, as it should be printed.
	Date string
	// Machine describes the computer: CPU model and count, OS.
	Machine string
	// Note is printed under the header when not empty.
	Note string
	// ResultsFile is the name of the benchstat-compatible file.
	ResultsFile string
	// StormQPS and StormBurst are the client limits of the restore storm.
	StormQPS, StormBurst int
}

func duration(ns float64) string {
	switch {
	case ns >= 1e9:
		return fmt.Sprintf("%.2f s", ns/1e9)
	case ns >= 1e6:
		return fmt.Sprintf("%.2f ms", ns/1e6)
	case ns >= 1e3:
		return fmt.Sprintf("%.1f µs", ns/1e3)
	}
	return fmt.Sprintf("%.0f ns", ns)
}

// StormLimits describes the client limits of the restore storm.
func StormLimits(qps, burst int) string {
	if qps < 0 {
		return "no client rate limit"
	}
	return fmt.Sprintf("client QPS %d, burst %d", qps, burst)
}

func seconds(s float64) string { return fmt.Sprintf("%.1f s", s) }
func mib(v float64) string     { return fmt.Sprintf("%.1f MiB", v) }

func number(v float64) string {
	if v == math.Trunc(v) && math.Abs(v) < 1e15 {
		return strconv.FormatFloat(v, 'f', 0, 64)
	}
	return strconv.FormatFloat(v, 'f', 3, 64)
}

func value(v float64, unit string) string {
	if strings.HasSuffix(unit, "ns/op") {
		return duration(v)
	}
	return number(v) + " " + unit
}

// Point is one size of a parameterised benchmark.
type Point struct {
	X      float64
	Values map[string]float64
}

// Series returns, sorted by the parameter, the summaries of benchmark base
// whose name carries parameter param, leaving out those run at a client QPS
// of their own (a "qps" parameter).
func Series(sums []Summary, base, param string) []Point {
	var out []Point
	for _, s := range sums {
		if s.Base() != base || s.Param("qps") != "" {
			continue
		}
		x, err := strconv.ParseFloat(s.Param(param), 64)
		if err != nil {
			continue
		}
		out = append(out, Point{X: x, Values: s.Median})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].X < out[j].X })
	return out
}

// WriteMarkdown writes the summary report.
func WriteMarkdown(w io.Writer, meta Meta, sums []Summary, plots []string) error {
	var b strings.Builder
	b.WriteString("# initlock benchmark report\n\n")
	fmt.Fprintf(&b, "- Date: %s\n- Machine: %s\n", meta.Date, meta.Machine)
	if meta.ResultsFile != "" {
		fmt.Fprintf(&b, "- Results: `%s` (Go benchmark format; compare two runs with benchstat)\n", meta.ResultsFile)
	}
	if meta.Note != "" {
		fmt.Fprintf(&b, "- Note: %s\n", meta.Note)
	}
	b.WriteString("\nEach figure stands next to its floor: the same work done with the fewest API requests a plain client could make, " +
		"measured in the same run, or, for the contention rows, the upstream lock of CABPK v1.14.2 doing the same. " +
		"Figures are medians when a benchmark ran more than once. Load is the one-minute load average at the start and at the end " +
		"of the run (the highest over the runs); **busy** marks runs during which it was above the machine's core count. " +
		"A benchmark's own control plane and clients load the machine on their own, so the Load column also gives the share of the " +
		"machine's CPU that other processes used during the run (the highest over the runs): a share in bold, above " +
		fmt.Sprintf("%.0f%%", loadavg.CompetedShare*100) + ", says something else competed with the benchmark and its times are suspect.\n\n")
	b.WriteString("| Benchmark | Figure | initlock | Floor | Ratio | Target | Met | Runs | Load |\n")
	b.WriteString("|---|---|---|---|---|---|---|---|---|\n")
	for _, r := range Rows(sums) {
		load := r.Load
		if r.Busy {
			load = "**busy** " + load
		}
		fmt.Fprintf(&b, "| %s | %s | %s | %s | %s | %s | %s | %d | %s |\n", r.Bench, r.Figure, r.Value, r.Floor, r.Ratio, r.Target, r.Met, r.Runs, load)
	}
	if storm := Series(sums, "RestoreStorm", "clusters"); len(storm) > 0 {
		fmt.Fprintf(&b, "\n## Restore storm: heal time against the number of clusters\n\n")
		fmt.Fprintf(&b, "Locks restored without ownerReferences, then Machines, then Clusters; the clock runs from the manager's start "+
			"(cache sync included) to the last lock owned again. The floor lists the Clusters and the locks and patches each lock once. "+
			"Both use %s. API requests are the API server's own count (apiserver_request_total) over the run, every client included; "+
			"CPU is this process's.\n\n", StormLimits(meta.StormQPS, meta.StormBurst))
		b.WriteString("| Clusters | initlock manager | raw patch loop | ratio | ConfigMap writes per lock (manager's count; API server's) | API writes per lock, events included | API requests per lock (floor) | CPU (floor) |\n" +
			"|---|---|---|---|---|---|---|---|\n")
		for _, p := range storm {
			v := p.Values
			fmt.Fprintf(&b, "| %.0f | %s | %s | %.2f | %s; %s | %s | %.2f (%.2f) | %s (%s) |\n", p.X, seconds(v["manager-s"]), seconds(v["raw-s"]),
				v["ratio"], number(v["writes/lock"]), perLock(v, "apiserver-cm-writes/lock"), perLock(v, "apiserver-writes/lock"),
				v["apiserver-req/lock"], v["raw-apiserver-req/lock"], seconds(v["manager-cpu-s"]), seconds(v["raw-cpu-s"]))
		}
	}
	if mem := Series(sums, "MemoryUnrelatedConfigMaps", "configmaps"); len(mem) > 0 {
		b.WriteString("\n## Memory against unrelated ConfigMaps\n\n")
		b.WriteString("Heap the manager adds to its process once synced (after a forced GC), with that many unrelated 1 KiB ConfigMaps in its namespace, " +
			"next to the same manager over the same Clusters with none.\n\n")
		b.WriteString("| Unrelated ConfigMaps | manager heap | without them | ratio |\n|---|---|---|---|\n")
		for _, p := range mem {
			fmt.Fprintf(&b, "| %.0f | %s | %s | %.3f |\n", p.X, mib(p.Values["MiB-with"]), mib(p.Values["MiB-none"]), p.Values["ratio"])
		}
	}
	if len(plots) > 0 {
		b.WriteString("\n## Plots\n\n")
		for _, p := range plots {
			fmt.Fprintf(&b, "![%s](%s)\n\n", strings.TrimSuffix(p, ".png"), p)
		}
	}
	_, err := io.WriteString(w, b.String())
	return err
}

// perLock prints a per-lock figure with three decimals, or "–" when a run
// from before it was measured lacks it.
func perLock(v map[string]float64, unit string) string {
	x, ok := v[unit]
	if !ok {
		return "–"
	}
	return fmt.Sprintf("%.3f", x)
}
