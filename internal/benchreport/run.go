package benchreport

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"time"
)

// Job is one go test -bench invocation.
type Job struct {
	// Dir is the folder go test runs in, relative to the Runner's: the
	// module's root when empty, the folder of a nested module otherwise.
	Dir string
	// Pkg is the package to benchmark, as go test takes it in Dir.
	Pkg string
	// Bench is the -bench regular expression.
	Bench string
	// Args go to the test binary, after -args.
	Args []string
	// Suffix is appended to the name of every benchmark the job runs, so
	// that runs of one benchmark with different flags stay apart in the
	// results file: "/clusters=250".
	Suffix string
	// Count and Benchtime are go test's -count and -benchtime.
	Count     int
	Benchtime string
	// Timeout is go test's -timeout.
	Timeout time.Duration
}

func (j Job) String() string {
	s := "go " + strings.Join(j.goArgs(), " ")
	if j.Dir != "" {
		s = "(cd " + j.Dir + " && " + s + ")"
	}
	return s
}

func (j Job) goArgs() []string {
	args := []string{"test", "-run=^$", "-bench=" + j.Bench, "-benchmem",
		"-count=" + strconv.Itoa(max(j.Count, 1)), "-timeout=" + j.Timeout.String()}
	if j.Benchtime != "" {
		args = append(args, "-benchtime="+j.Benchtime)
	}
	args = append(args, j.Pkg)
	if len(j.Args) > 0 {
		args = append(args, "-args")
		args = append(args, j.Args...)
	}
	return args
}

// PlanOptions choose the sizes of a benchmark run.
type PlanOptions struct {
	// Scaling are the cluster counts of the restore-storm runs.
	Scaling []int
	// Memory are the unrelated-ConfigMap counts of the memory runs.
	Memory []int
	// StormQPS and StormBurst are the client limits of the restore storm,
	// for the manager and the raw patch loop alike; a negative StormQPS
	// leaves the clients without a rate limit.
	StormQPS, StormBurst int
	// ThrottledClusters, when not 0, adds a restore storm of that size at
	// ThrottledQPS and ThrottledBurst: the manager's default limits.
	ThrottledClusters, ThrottledQPS, ThrottledBurst int
	// RelinkObjects sizes the relinker's benchmark.
	RelinkObjects int
	// ScaleClusters sizes the start-up benchmark (three Machines and a lock
	// per Cluster); 0 leaves it out.
	ScaleClusters int
	// SteadyClusters and SteadyFor size the steady-state run.
	SteadyClusters int
	SteadyFor      time.Duration
	// LibraryCount and LibraryBenchtime repeat the library benchmarks.
	LibraryCount     int
	LibraryBenchtime string
	// ContentionCallers Machines call Lock at once, ContentionRounds times
	// for each lock; no contention run when ContentionRounds is 0.
	ContentionCallers, ContentionRounds int
}

// DefaultPlanOptions are the sizes make bench uses.
func DefaultPlanOptions() PlanOptions {
	return PlanOptions{
		Scaling:           []int{1000, 2000, 5000, 10000},
		Memory:            []int{0, 5000, 10000, 20000},
		StormQPS:          -1,
		StormBurst:        0,
		ThrottledClusters: 1000,
		ThrottledQPS:      20,
		ThrottledBurst:    30,
		RelinkObjects:     50000,
		ScaleClusters:     10000,
		SteadyClusters:    2000,
		SteadyFor:         60 * time.Second,
		LibraryCount:      6,
		LibraryBenchtime:  "200x",
		ContentionCallers: 50,
		ContentionRounds:  10,
	}
}

// QuickPlanOptions make a run of a few minutes, to try the tooling.
func QuickPlanOptions() PlanOptions {
	return PlanOptions{
		Scaling:           []int{50, 100},
		Memory:            []int{0, 500},
		StormQPS:          -1,
		StormBurst:        0,
		ThrottledClusters: 50,
		ThrottledQPS:      20,
		ThrottledBurst:    30,
		RelinkObjects:     1000,
		ScaleClusters:     500,
		SteadyClusters:    100,
		SteadyFor:         5 * time.Second,
		LibraryCount:      2,
		LibraryBenchtime:  "20x",
		ContentionCallers: 50,
		ContentionRounds:  2,
	}
}

// Packages whose benchmarks Plan knows. ContentionDir is a module of its
// own (it requires Cluster API, to measure the upstream lock next to
// initlock's); its package is "." there.
const (
	LibraryPkg    = "./test/library"
	ManagerPkg    = "./test/manager/bench"
	RelinkPkg     = "./test/relink"
	ContentionDir = "hack/contention"
)

// Plan returns the jobs of a benchmark run: the library's benchmarks (the
// lock guard's among them), the
// contention benchmark, the manager's restore storm for each size of
// o.Scaling and once throttled, its other benchmarks, its memory benchmark
// for each size of o.Memory, its start-up at scale, the relinker's, and
// every benchmark of the packages listed in others.
func Plan(o PlanOptions, others []string) []Job {
	jobs := []Job{{Pkg: LibraryPkg, Bench: "^Benchmark(FreeLock|ReLock|LockGuard)$", Count: o.LibraryCount,
		Benchtime: o.LibraryBenchtime, Timeout: 30 * time.Minute}}
	if o.ContentionRounds > 0 {
		callers := strconv.Itoa(o.ContentionCallers)
		jobs = append(jobs, Job{Dir: ContentionDir, Pkg: ".", Bench: "^BenchmarkContention$",
			Benchtime: strconv.Itoa(o.ContentionRounds) + "x", Timeout: 30 * time.Minute,
			Args: []string{"-contention.callers=" + callers}, Suffix: "/callers=" + callers})
		jobs = append(jobs, Job{Dir: ContentionDir, Pkg: ".", Bench: "^BenchmarkFreeLockVsUpstream$",
			Benchtime: strconv.Itoa(20*o.ContentionRounds) + "x", Timeout: 30 * time.Minute})
	}
	storm := []string{"-storm.qps=" + strconv.Itoa(o.StormQPS), "-storm.burst=" + strconv.Itoa(o.StormBurst)}
	for _, n := range o.Scaling {
		jobs = append(jobs, Job{Pkg: ManagerPkg, Bench: "^BenchmarkRestoreStorm$", Benchtime: "1x", Timeout: 2 * time.Hour,
			Args: append([]string{"-storm.clusters=" + strconv.Itoa(n)}, storm...), Suffix: "/clusters=" + strconv.Itoa(n)})
	}
	if n := o.ThrottledClusters; n > 0 {
		jobs = append(jobs, Job{Pkg: ManagerPkg, Bench: "^BenchmarkRestoreStorm$", Benchtime: "1x", Timeout: 2 * time.Hour,
			Args: []string{"-storm.clusters=" + strconv.Itoa(n), "-storm.qps=" + strconv.Itoa(o.ThrottledQPS),
				"-storm.burst=" + strconv.Itoa(o.ThrottledBurst)},
			Suffix: "/clusters=" + strconv.Itoa(n) + "/qps=" + strconv.Itoa(o.ThrottledQPS)})
	}
	if len(o.Scaling) > 0 {
		n := o.Scaling[len(o.Scaling)-1]
		jobs = append(jobs, Job{Pkg: ManagerPkg, Bench: "^BenchmarkRestoreWhileRunning$", Benchtime: "1x", Timeout: time.Hour,
			Args: append([]string{"-storm.clusters=" + strconv.Itoa(n)}, storm...), Suffix: "/clusters=" + strconv.Itoa(n)})
	}
	jobs = append(jobs, Job{Pkg: ManagerPkg, Bench: "^BenchmarkSteadyState$", Benchtime: "1x", Timeout: time.Hour,
		Args:   []string{"-steady.clusters=" + strconv.Itoa(o.SteadyClusters), "-steady.duration=" + o.SteadyFor.String()},
		Suffix: "/clusters=" + strconv.Itoa(o.SteadyClusters)})
	for _, m := range o.Memory {
		jobs = append(jobs, Job{Pkg: ManagerPkg, Bench: "^BenchmarkMemoryUnrelatedConfigMaps$", Benchtime: "1x", Timeout: time.Hour,
			Args: []string{"-memory.configmaps=" + strconv.Itoa(m)}, Suffix: "/configmaps=" + strconv.Itoa(m)})
	}
	if n := o.ScaleClusters; n > 0 {
		jobs = append(jobs, Job{Pkg: ManagerPkg, Bench: "^BenchmarkStartupAtScale$", Benchtime: "1x", Timeout: 2 * time.Hour,
			Args: []string{"-scale.clusters=" + strconv.Itoa(n)}, Suffix: "/clusters=" + strconv.Itoa(n)})
	}
	if o.RelinkObjects > 0 {
		jobs = append(jobs, Job{Pkg: RelinkPkg, Bench: "^BenchmarkRelink$", Benchtime: "1x", Timeout: 2 * time.Hour,
			Args: []string{"-relink.objects=" + strconv.Itoa(o.RelinkObjects)}, Suffix: "/objects=" + strconv.Itoa(o.RelinkObjects)})
	}
	for _, pkg := range others {
		jobs = append(jobs, Job{Pkg: pkg, Bench: ".", Count: 1, Timeout: time.Hour})
	}
	return jobs
}

var benchFunc = regexp.MustCompile(`(?m)^func Benchmark\w*\(`)

// PackagesWithBenchmarks lists, as "./dir", the folders under root whose
// _test.go files declare benchmarks, skipping those in skip.
func PackagesWithBenchmarks(root string, skip ...string) ([]string, error) {
	found := map[string]bool{}
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			name := d.Name()
			if path != root && (strings.HasPrefix(name, ".") || name == "testdata" || name == "vendor" || name == "results" || name == "hack") {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(path, "_test.go") {
			return nil
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		if benchFunc.Match(b) {
			rel, err := filepath.Rel(root, filepath.Dir(path))
			if err != nil {
				return err
			}
			found["./"+filepath.ToSlash(rel)] = true
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	for _, s := range skip {
		delete(found, s)
	}
	out := make([]string, 0, len(found))
	for p := range found {
		out = append(out, p)
	}
	sort.Strings(out)
	return out, nil
}

// Runner runs jobs in a module and writes their results.
type Runner struct {
	// Dir is the module's folder.
	Dir string
	// Results receives the benchmark and configuration lines,
	// benchstat-compatible.
	Results io.Writer
	// Log receives everything go test prints, and a line per job.
	Log io.Writer
	// Go is the go command; "go" when empty.
	Go string
}

// Run runs the jobs one after the other. A failing job is reported and
// the others still run; the errors are joined.
func (r *Runner) Run(ctx context.Context, jobs []Job) error {
	var errs []error
	for i, j := range jobs {
		fmt.Fprintf(r.Log, "benchreport: [%d/%d] %s\n", i+1, len(jobs), j)
		start := time.Now()
		if err := r.run(ctx, j); err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", j, err))
			fmt.Fprintf(r.Log, "benchreport: FAILED after %s: %v\n", time.Since(start).Round(time.Second), err)
			if ctx.Err() != nil {
				break
			}
			continue
		}
		fmt.Fprintf(r.Log, "benchreport: done in %s\n", time.Since(start).Round(time.Second))
	}
	return errors.Join(errs...)
}

func (r *Runner) run(ctx context.Context, j Job) error {
	goCmd := r.Go
	if goCmd == "" {
		goCmd = "go"
	}
	cmd := exec.CommandContext(ctx, goCmd, j.goArgs()...)
	cmd.Dir = filepath.Join(r.Dir, j.Dir)
	cmd.Stderr = r.Log
	out, err := cmd.StdoutPipe()
	if err != nil {
		return err
	}
	if err := cmd.Start(); err != nil {
		return err
	}
	sc := bufio.NewScanner(out)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		fmt.Fprintln(r.Log, line)
		switch {
		case benchLine.MatchString(line):
			fmt.Fprintln(r.Results, rename(line, j.Suffix))
		case isConfig(line):
			fmt.Fprintln(r.Results, line)
		}
	}
	return errors.Join(sc.Err(), cmd.Wait())
}

// isConfig tells whether line is one of the configuration lines go test
// prints before benchmarks.
func isConfig(line string) bool {
	m := configLine.FindStringSubmatch(line)
	return m != nil && (m[1] == "goos" || m[1] == "goarch" || m[1] == "pkg" || m[1] == "cpu")
}

// rename inserts suffix into a benchmark line's name, before the GOMAXPROCS
// suffix.
func rename(line, suffix string) string {
	if suffix == "" {
		return line
	}
	m := benchLine.FindStringSubmatchIndex(line)
	end := m[3] // end of the name
	return line[:end] + suffix + line[end:]
}
