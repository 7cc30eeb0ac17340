package benchreport

import (
	"bufio"
	"fmt"
	"io"
	"math"
	"regexp"
	"sort"
	"strconv"
	"strings"
)

// Result is one benchmark line of a results file.
type Result struct {
	// Pkg is the package, from the last "pkg:" line before it.
	Pkg string
	// Name is the benchmark's name without the "Benchmark" prefix and the
	// GOMAXPROCS suffix, with its sub-benchmark parts: "RestoreStorm/clusters=250".
	Name string
	// Procs is the GOMAXPROCS suffix, 1 when there is none.
	Procs      int
	Iterations int64
	// Metrics by unit: "ns/op", "ratio", "manager-s"...
	Metrics map[string]float64
	// Units in the order of the line.
	Units []string
}

// Param returns the value of a "key=value" part of the name, or "".
func (r Result) Param(key string) string {
	for _, part := range strings.Split(r.Name, "/")[1:] {
		if k, v, ok := strings.Cut(part, "="); ok && k == key {
			return v
		}
	}
	return ""
}

// Base is the name without its sub-benchmark parts.
func (r Result) Base() string {
	base, _, _ := strings.Cut(r.Name, "/")
	return base
}

// File is a parsed results file.
type File struct {
	// Config is the configuration ("goos", "cpu"...) as last seen.
	Config  map[string]string
	Results []Result
}

var (
	benchLine  = regexp.MustCompile(`^Benchmark(\S+?)(?:-(\d+))?\s+(\d+)\s+(.*)$`)
	configLine = regexp.MustCompile(`^([a-z][^\s:]*):\s+(.*)$`)
)

// Parse reads the Go benchmark format (what go test -bench prints, and what
// benchstat reads). Lines it does not know are ignored.
func Parse(r io.Reader) (*File, error) {
	f := &File{Config: map[string]string{}}
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		line := strings.TrimRight(sc.Text(), " \t")
		if m := configLine.FindStringSubmatch(line); m != nil && !strings.HasPrefix(line, "Benchmark") {
			f.Config[m[1]] = m[2]
			continue
		}
		m := benchLine.FindStringSubmatch(line)
		if m == nil {
			continue
		}
		res := Result{Pkg: f.Config["pkg"], Name: m[1], Procs: 1, Metrics: map[string]float64{}}
		if m[2] != "" {
			res.Procs, _ = strconv.Atoi(m[2])
		}
		res.Iterations, _ = strconv.ParseInt(m[3], 10, 64)
		fields := strings.Fields(m[4])
		if len(fields)%2 != 0 {
			return nil, fmt.Errorf("benchmark line %q: values and units do not pair up", line)
		}
		for i := 0; i < len(fields); i += 2 {
			v, err := strconv.ParseFloat(fields[i], 64)
			if err != nil {
				return nil, fmt.Errorf("benchmark line %q: %q is not a number: %w", line, fields[i], err)
			}
			res.Metrics[fields[i+1]] = v
			res.Units = append(res.Units, fields[i+1])
		}
		f.Results = append(f.Results, res)
	}
	return f, sc.Err()
}

// Summary is the runs of one benchmark, summarised.
type Summary struct {
	Pkg, Name string
	Runs      int
	// Median, Min and Max of each metric over the runs.
	Median, Min, Max map[string]float64
	Units            []string
}

// Summarise groups the results by package and name, in order of first
// appearance, and takes the median of each metric.
func Summarise(results []Result) []Summary {
	type key struct{ pkg, name string }
	var order []key
	groups := map[key][]Result{}
	for _, r := range results {
		k := key{r.Pkg, r.Name}
		if _, ok := groups[k]; !ok {
			order = append(order, k)
		}
		groups[k] = append(groups[k], r)
	}
	out := make([]Summary, 0, len(order))
	for _, k := range order {
		rs := groups[k]
		s := Summary{Pkg: k.pkg, Name: k.name, Runs: len(rs), Median: map[string]float64{}, Min: map[string]float64{},
			Max: map[string]float64{}, Units: rs[0].Units}
		values := map[string][]float64{}
		for _, r := range rs {
			for u, v := range r.Metrics {
				values[u] = append(values[u], v)
			}
		}
		for u, vs := range values {
			sort.Float64s(vs)
			s.Min[u], s.Max[u] = vs[0], vs[len(vs)-1]
			s.Median[u] = median(vs)
		}
		out = append(out, s)
	}
	return out
}

func median(sorted []float64) float64 {
	n := len(sorted)
	if n == 0 {
		return math.NaN()
	}
	if n%2 == 1 {
		return sorted[n/2]
	}
	return (sorted[n/2-1] + sorted[n/2]) / 2
}

// Param returns the value of a "key=value" part of the summary's name.
func (s Summary) Param(key string) string { return Result{Name: s.Name}.Param(key) }

// Base is the name without its sub-benchmark parts.
func (s Summary) Base() string { return Result{Name: s.Name}.Base() }
