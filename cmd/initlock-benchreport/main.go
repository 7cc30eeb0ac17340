// Command initlock-benchreport runs the benchmarks of the library, of the
// library under contention next to the upstream lock (the hack/contention
// module), of the manager and of every other package that has some, in one
// go, and writes the report into a folder (results/bench by default):
// bench.txt, the results
// in the Go benchmark format that benchstat reads; bench.log, everything
// the runs printed; summary.md, the summary table; scaling.png and
// memory.png. See docs/performance.md.
//
// With -from it only builds the report from an existing results file.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"time"

	"github.com/initlock/initlock/internal/benchreport"
)

func main() {
	if err := run(); err != nil {
		fmt.Fprintf(os.Stderr, "initlock-benchreport: %v\n", err)
		os.Exit(1)
	}
}

func run() error {
	opts := benchreport.DefaultPlanOptions()
	out := flag.String("out", "results/bench", "Folder the report is written into.")
	from := flag.String("from", "", "Build the report from this results file instead of running the benchmarks.")
	quick := flag.Bool("quick", false, "Small sizes: a run of a few minutes, to try the tooling.")
	scaling := flag.String("scaling", "", "Cluster counts of the unthrottled restore-storm runs (default 1000,2000,5000,10000).")
	throttled := flag.Int("throttled", -1, "Clusters of the restore storm at the manager's default client QPS (default 1000; 0 leaves it out).")
	relinkObjects := flag.Int("relink-objects", 0, "Objects the relinker's benchmark links (default 50000).")
	memory := flag.String("memory", "", "Unrelated-ConfigMap counts of the memory runs (default 0,5000,10000,20000).")
	rounds := flag.Int("contention-rounds", -1, "Rounds of the contention benchmark, per lock (default 10; 0 leaves it out).")
	callers := flag.Int("contention-callers", 0, "Machines calling Lock at once in the contention benchmark (default 50).")
	note := flag.String("note", "", "A note printed in the report's header.")
	flag.Parse()
	if *quick {
		opts = benchreport.QuickPlanOptions()
	}
	var err error
	if *scaling != "" {
		if opts.Scaling, err = ints(*scaling); err != nil {
			return fmt.Errorf("-scaling: %w", err)
		}
	}
	if *memory != "" {
		if opts.Memory, err = ints(*memory); err != nil {
			return fmt.Errorf("-memory: %w", err)
		}
	}
	if *throttled >= 0 {
		opts.ThrottledClusters = *throttled
	}
	if *relinkObjects > 0 {
		opts.RelinkObjects = *relinkObjects
	}
	if *rounds >= 0 {
		opts.ContentionRounds = *rounds
	}
	if *callers > 0 {
		opts.ContentionCallers = *callers
	}
	if err := os.MkdirAll(*out, 0o755); err != nil {
		return err
	}
	meta := benchreport.Meta{Date: time.Now().UTC().Format("2006-01-02 15:04 MST"), Note: *note,
		StormQPS: opts.StormQPS, StormBurst: opts.StormBurst, ResultsFile: "bench.txt"}
	results := filepath.Join(*out, "bench.txt")
	var runErr error
	if *from != "" {
		results = *from
		meta.ResultsFile = *from
		if fi, err := os.Stat(*from); err == nil {
			meta.Date = fi.ModTime().UTC().Format("2006-01-02 15:04 MST")
		}
	} else {
		runErr = runBenchmarks(opts, *out, results)
		if errors.Is(runErr, context.Canceled) {
			return runErr
		}
	}
	f, err := os.Open(results)
	if err != nil {
		return errors.Join(runErr, err)
	}
	parsed, err := benchreport.Parse(f)
	_ = f.Close()
	if err != nil {
		return errors.Join(runErr, err)
	}
	meta.Machine = machine(parsed.Config["cpu"])
	if load := loads(filepath.Join(filepath.Dir(results), "bench.log")); load != "" {
		meta.Machine += "; " + load
	}
	sums := benchreport.Summarise(parsed.Results)
	var plots []string
	for _, pl := range []struct {
		name string
		draw func(string) error
	}{
		{"scaling.png", func(p string) error { return benchreport.PlotScaling(p, sums, opts.StormQPS, opts.StormBurst) }},
		{"memory.png", func(p string) error { return benchreport.PlotMemory(p, sums) }},
	} {
		name := pl.name
		err := pl.draw(filepath.Join(*out, name))
		switch {
		case errors.Is(err, benchreport.ErrNoData):
			fmt.Fprintf(os.Stderr, "initlock-benchreport: no data for %s\n", name)
		case err != nil:
			return errors.Join(runErr, fmt.Errorf("drawing %s: %w", name, err))
		default:
			plots = append(plots, name)
		}
	}
	md, err := os.Create(filepath.Join(*out, "summary.md"))
	if err != nil {
		return errors.Join(runErr, err)
	}
	err = benchreport.WriteMarkdown(md, meta, sums, plots)
	if cerr := md.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return errors.Join(runErr, err)
	}
	fmt.Fprintf(os.Stderr, "initlock-benchreport: report in %s (summary.md, %s, %s)\n", *out, filepath.Base(results), strings.Join(plots, ", "))
	return runErr
}

// runBenchmarks runs every job, writing the results file and the log.
func runBenchmarks(opts benchreport.PlanOptions, out, results string) error {
	others, err := benchreport.PackagesWithBenchmarks(".", benchreport.LibraryPkg, benchreport.ManagerPkg, benchreport.RelinkPkg)
	if err != nil {
		return err
	}
	jobs := benchreport.Plan(opts, others)
	resFile, err := os.Create(results)
	if err != nil {
		return err
	}
	defer resFile.Close()
	logFile, err := os.Create(filepath.Join(out, "bench.log"))
	if err != nil {
		return err
	}
	defer logFile.Close()
	logLoad(logFile, "start")
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	r := &benchreport.Runner{Dir: ".", Results: resFile, Log: io.MultiWriter(logFile, progress{os.Stderr})}
	err = r.Run(ctx, jobs)
	logLoad(logFile, "end")
	return err
}

const loadPrefix = "benchreport: load average (1, 5, 15 min) at "

// logLoad writes the machine's load average into the log.
func logLoad(w io.Writer, when string) {
	if load, err := os.ReadFile("/proc/loadavg"); err == nil {
		f := strings.Fields(string(load))
		if len(f) >= 3 {
			fmt.Fprintf(w, "%s%s: %s %s %s\n", loadPrefix, when, f[0], f[1], f[2])
		}
	}
}

// loads reads back the load averages logLoad wrote.
func loads(logPath string) string {
	b, err := os.ReadFile(logPath)
	if err != nil {
		return ""
	}
	var out []string
	for _, line := range strings.Split(string(b), "\n") {
		if rest, ok := strings.CutPrefix(line, loadPrefix); ok {
			out = append(out, rest)
		}
	}
	if len(out) == 0 {
		return ""
	}
	return "load average (1, 5, 15 min) at " + strings.Join(out, ", at ")
}

// progress passes on the runner's own lines and the benchmark results, and
// drops the rest of what go test prints (it is in bench.log).
type progress struct{ w io.Writer }

func (p progress) Write(b []byte) (int, error) {
	for _, line := range strings.SplitAfter(string(b), "\n") {
		if strings.HasPrefix(line, "benchreport:") || strings.HasPrefix(line, "Benchmark") || strings.HasPrefix(line, "--- FAIL") {
			if _, err := io.WriteString(p.w, line); err != nil {
				return 0, err
			}
		}
	}
	return len(b), nil
}

func machine(cpu string) string {
	if cpu == "" {
		cpu = "unknown CPU"
	}
	return fmt.Sprintf("%s, %d logical CPUs, %s/%s, %s", cpu, runtime.NumCPU(), runtime.GOOS, runtime.GOARCH, runtime.Version())
}

func ints(s string) ([]int, error) {
	var out []int
	for _, f := range strings.Split(s, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil {
			return nil, err
		}
		out = append(out, n)
	}
	return out, nil
}
