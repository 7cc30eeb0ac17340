package benchreport

import (
	"fmt"
	"io"
	"math"
	"sort"
	"strconv"
	"strings"
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

// Row is one line of the summary table: a figure next to its raw-client
// floor and their ratio.
type Row struct {
	Bench, Figure, Value, Floor, Ratio, Target string
	// Met is "yes", "no" or "" (no target).
	Met  string
	Runs int
}

// Rows turns summaries into the rows of the summary table. Benchmarks it
// does not know get a row per metric.
func Rows(sums []Summary) []Row {
	var rows []Row
	for _, s := range sums {
		rows = append(rows, rowsOf(s)...)
	}
	return rows
}

func rowsOf(s Summary) []Row {
	m := s.Median
	has := func(units ...string) bool {
		for _, u := range units {
			if _, ok := m[u]; !ok {
				return false
			}
		}
		return true
	}
	row := func(figure, value, floor string, ratio float64, target string, met bool, hasTarget bool) Row {
		r := Row{Bench: s.Name, Figure: figure, Value: value, Floor: floor, Target: target, Runs: s.Runs}
		if !math.IsNaN(ratio) {
			r.Ratio = fmt.Sprintf("%.2f", ratio)
		}
		if hasTarget {
			r.Met = map[bool]string{true: "yes", false: "no"}[met]
		}
		return r
	}
	switch s.Base() {
	case "FreeLock":
		if has("lock-ns/op", "raw-create-ns/op", "ratio") {
			return []Row{row("free Lock (2 writes in parallel, no read) vs a raw ConfigMap Create", duration(m["lock-ns/op"]),
				duration(m["raw-create-ns/op"]), m["ratio"], "ratio ≤ 2.0", m["ratio"] <= 2.0, true)}
		}
	case "ReLock":
		if has("lock-ns/op", "raw-get-ns/op", "ratio") {
			return []Row{row("healthy re-Lock (1 read, 0 writes) vs a raw ConfigMap Get", duration(m["lock-ns/op"]),
				duration(m["raw-get-ns/op"]), m["ratio"], "ratio ≤ 1.2", m["ratio"] <= 1.2, true)}
		}
	case "RestoreStorm":
		if has("manager-s", "raw-s", "ratio") {
			rows := []Row{row(fmt.Sprintf("restore storm, %s clusters: time until every lock is owned again", s.Param("clusters")),
				seconds(m["manager-s"]), seconds(m["raw-s"])+" (patch loop)", m["ratio"], "ratio ≤ 1.5", m["ratio"] <= 1.5, true)}
			if has("writes/lock") {
				rows = append(rows, row("restore storm: ConfigMap writes per lock", number(m["writes/lock"]), "1 (one patch)",
					m["writes/lock"], "exactly 1", m["writes/lock"] == 1, true))
			}
			return rows
		}
	case "RestoreWhileRunning":
		var rows []Row
		if has("writes/lock") {
			rows = append(rows, row(fmt.Sprintf("restore while running, %s clusters: ConfigMap writes per lock", s.Param("clusters")),
				number(m["writes/lock"]), "1 (one patch)", m["writes/lock"], "exactly 1", m["writes/lock"] == 1, true))
		}
		if has("s-from-first-cluster") {
			rows = append(rows, row("restore while running: first Cluster to every lock owned", seconds(m["s-from-first-cluster"]),
				"", math.NaN(), "", false, false))
		}
		if rows != nil {
			return rows
		}
	case "SteadyState":
		if has("writes", "reads") {
			rows := []Row{row(fmt.Sprintf("steady state, %s healthy clusters: writes", s.Param("clusters")), number(m["writes"]), "0",
				math.NaN(), "0", m["writes"] == 0, true),
				row("steady state: reads (live GETs and LISTs)", number(m["reads"]), "", math.NaN(), "", false, false)}
			if has("reconciles") {
				rows = append(rows, row("steady state: reconciles", number(m["reconciles"]), "", math.NaN(), "", false, false))
			}
			return rows
		}
	case "Relink":
		if has("relink-ns/object", "raw-ns/object", "ratio") {
			rows := []Row{row("relinker: restored objects linked to their owners, time per object", duration(m["relink-ns/object"]),
				duration(m["raw-ns/object"])+" (patch loop)", m["ratio"], "ratio ≤ 1.5", m["ratio"] <= 1.5, true)}
			if has("patches/object") {
				rows = append(rows, row("relinker: patches per object", number(m["patches/object"]), "1 (one patch)",
					m["patches/object"], "exactly 1", m["patches/object"] == 1, true))
			}
			return rows
		}
	case "MemoryUnrelatedConfigMaps":
		if has("MiB-with", "MiB-none", "ratio") {
			return []Row{row(fmt.Sprintf("manager heap with %s unrelated ConfigMaps vs none", s.Param("configmaps")),
				mib(m["MiB-with"]), mib(m["MiB-none"]), m["ratio"], "ratio ≤ 1.1", m["ratio"] <= 1.1, true)}
		}
	}
	// A benchmark this report does not know: one row per metric.
	var rows []Row
	for _, u := range s.Units {
		if u == "B/op" || u == "allocs/op" {
			continue
		}
		rows = append(rows, row(u, value(m[u], u), "", math.NaN(), "", false, false))
	}
	return rows
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
// whose name carries parameter param.
func Series(sums []Summary, base, param string) []Point {
	var out []Point
	for _, s := range sums {
		if s.Base() != base {
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
	b.WriteString("\nEach figure stands next to its raw-client floor: the same work done with the fewest API requests a plain client could make, " +
		"measured in the same run. Figures are medians when a benchmark ran more than once.\n\n")
	b.WriteString("| Benchmark | Figure | initlock | Raw-client floor | Ratio | Target | Met | Runs |\n")
	b.WriteString("|---|---|---|---|---|---|---|---|\n")
	for _, r := range Rows(sums) {
		fmt.Fprintf(&b, "| %s | %s | %s | %s | %s | %s | %s | %d |\n", r.Bench, r.Figure, r.Value, r.Floor, r.Ratio, r.Target, r.Met, r.Runs)
	}
	if storm := Series(sums, "RestoreStorm", "clusters"); len(storm) > 0 {
		fmt.Fprintf(&b, "\n## Restore storm: heal time against the number of clusters\n\n")
		fmt.Fprintf(&b, "Locks restored without ownerReferences, then Machines, then Clusters; the clock runs from the manager's start "+
			"(cache sync included) to the last lock owned again. The floor lists the Clusters and the locks and patches each lock once. "+
			"Both use client QPS %d, burst %d.\n\n", meta.StormQPS, meta.StormBurst)
		b.WriteString("| Clusters | initlock manager | raw patch loop | ratio | ConfigMap writes per lock |\n|---|---|---|---|---|\n")
		for _, p := range storm {
			fmt.Fprintf(&b, "| %.0f | %s | %s | %.2f | %s |\n", p.X, seconds(p.Values["manager-s"]), seconds(p.Values["raw-s"]),
				p.Values["ratio"], number(p.Values["writes/lock"]))
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
