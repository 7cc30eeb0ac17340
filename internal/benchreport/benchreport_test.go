package benchreport_test

import (
	"errors"
	"image/png"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/initlock/initlock/internal/benchreport"
)

func parseFixture(t *testing.T) *benchreport.File {
	t.Helper()
	f, err := os.Open("testdata/bench.txt")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	parsed, err := benchreport.Parse(f)
	if err != nil {
		t.Fatal(err)
	}
	return parsed
}

func TestParse(t *testing.T) {
	f := parseFixture(t)
	if n := len(f.Results); n != 16 {
		t.Fatalf("%d results, want 16", n)
	}
	if c := f.Results[5]; c.Pkg != "github.com/initlock/initlock/hack/contention" || c.Param("callers") != "50" || c.Metrics["p99-ratio"] != 1.4 {
		t.Fatalf("contention result %+v", c)
	}
	if c := f.Results[6]; c.Name != "FreeLockVsUpstream" || c.Metrics["ratio"] != 1.7 {
		t.Fatalf("free Lock result %+v", c)
	}
	r := f.Results[7]
	if r.Name != "RestoreStorm/clusters=250" || r.Procs != 2 || r.Iterations != 1 || r.Param("clusters") != "250" ||
		r.Base() != "RestoreStorm" || r.Pkg != "github.com/initlock/initlock/test/manager/bench" {
		t.Fatalf("result %+v", r)
	}
	if r.Metrics["manager-s"] != 6 || r.Metrics["writes/lock"] != 1 {
		t.Fatalf("metrics %v", r.Metrics)
	}
	if f.Config["cpu"] != "Example CPU @ 2.00GHz" {
		t.Fatalf("config %v", f.Config)
	}
}

func TestSummariseAndRows(t *testing.T) {
	sums := benchreport.Summarise(parseFixture(t).Results)
	if len(sums) != 14 {
		t.Fatalf("%d summaries, want 14", len(sums))
	}
	free := sums[0]
	if free.Name != "FreeLock" || free.Runs != 3 || free.Median["lock-ns/op"] != 14e6 || free.Min["ratio"] != 1.857 {
		t.Fatalf("FreeLock summary %+v", free)
	}
	rows := benchreport.Rows(sums)
	byFigure := map[string]benchreport.Row{}
	for _, r := range rows {
		byFigure[r.Bench+" "+r.Figure] = r
	}
	for key, want := range map[string][3]string{
		"FreeLock free Lock (PATCH register ∥ GET Machine, then CREATE) vs a raw ConfigMap Create":                                                                         {"14.00 ms", "2.00", "no"},
		"FreeLock free Lock vs its two writes one after the other, each timed alone":                                                                                       {"14.00 ms", "0.93", "yes"},
		"FreeLockVsUpstream free Lock vs the upstream lock's free Lock (GET, then CREATE), median":                                                                         {"6.80 ms", "1.70", "no"},
		"FreeLock free Lock: requests per call":                                                                                                                            {"1 reads, 2 writes", "", "yes"},
		"ReLock healthy re-Lock (3 reads in parallel, 0 writes) vs a raw ConfigMap Get":                                                                                    {"1.60 ms", "1.14", "yes"},
		"ReLock healthy re-Lock: requests per call":                                                                                                                        {"3 reads, 0 writes", "", "yes"},
		"LockGuard update of a ConfigMap that is not a lock, with the lock guard vs without (the policy's objectSelector leaves it unmatched)":                             {"1.005", "1.00", ""},
		"LockGuard delete of a ConfigMap that is not a lock, with the lock guard vs without (the policy's objectSelector leaves it unmatched)":                             {"1.020", "1.02", ""},
		"LockGuard time in the ValidatingAdmissionPolicy plugin per update of a ConfigMap that is not a lock, with the lock guard vs without (the API server's histogram)": {"12.0 µs", "3.00", ""},
		"LockGuard update of a ConfigMap that is not a lock: its latency without the guard plus the plugin time the guard adds, vs its latency without the guard":          {"1.0060", "1.01", "yes"},
		"Contention/callers=50 contention: requests":                                                                                                                       {"7.5 per caller", "3.75", ""},
		"RestoreStorm/clusters=250 restore storm, 250 clusters, no client rate limit: time until every lock is owned again":                                                {"6.0 s", "1.20", "yes"},
		"RestoreStorm/clusters=250/qps=20 restore storm, 250 clusters, client QPS 20: time until every lock is owned again":                                                {"14.0 s", "1.08", "yes"},
		"RestoreStorm/clusters=500 restore storm: requests the API server served per lock (apiserver_request_total, every client)":                                         {"2.50", "2.00", ""},
		"RestoreStorm/clusters=500 restore storm: CPU time of the process (manager, or patch loop)":                                                                        {"8.0 s", "2.00", ""},
		"SteadyState/clusters=100 steady state, 100 healthy clusters: writes":                                                                                              {"0", "", "yes"},
		"MemoryUnrelatedConfigMaps/configmaps=5000 manager heap with 5000 unrelated ConfigMaps vs none":                                                                    {"4.2 MiB", "1.05", "yes"},
		"Relink relinker, 10000 restored objects linked to their owners: time per object":                                                                                  {"7.07 ms", "1.68", "no"},
		"Other patches/op": {"2.500 patches/op", "", ""},
		"Contention/callers=50 contention, 50 Machines calling Lock at once: p99 over callers of the time to their final answer": {"420 ms", "1.40", "yes"},
	} {
		r, ok := byFigure[key]
		if !ok {
			t.Fatalf("no row %q in %+v", key, rows)
		}
		if got := [3]string{r.Value, r.Ratio, r.Met}; got != want {
			t.Errorf("row %q: value, ratio, met = %q, want %q", key, got, want)
		}
	}
	if r := byFigure["FreeLock free Lock vs its two writes one after the other, each timed alone"]; r.Floor != "15.00 ms (compare-and-swap patch of a Cluster + Create)" ||
		r.Load != "0.60 → 0.70, others 5%" || r.Busy || r.Competed {
		t.Errorf("FreeLock floor row %+v", r)
	}
	if r := byFigure["Contention/callers=50 contention: requests"]; !r.Busy || !r.Competed || r.Load != "1.20 → 3.10, **others 35%**" {
		t.Errorf("contention row %+v, want it busy and competed", r)
	}
	if r := byFigure["Other patches/op"]; r.Load != "" || r.Busy {
		t.Errorf("row without load %+v", r)
	}
	storm := benchreport.Series(sums, "RestoreStorm", "clusters")
	if xs := []float64{storm[0].X, storm[1].X}; !reflect.DeepEqual(xs, []float64{250, 500}) {
		t.Fatalf("storm series %v", storm)
	}
}

// TestReport writes the Markdown and both plots, and checks the plots are
// PNG images of a readable size.
func TestReport(t *testing.T) {
	sums := benchreport.Summarise(parseFixture(t).Results)
	dir := t.TempDir()
	for name, draw := range map[string]func(string) error{
		"scaling.png": func(p string) error { return benchreport.PlotScaling(p, sums, 50, 100) },
		"memory.png":  func(p string) error { return benchreport.PlotMemory(p, sums) },
	} {
		path := filepath.Join(dir, name)
		if err := draw(path); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		f, err := os.Open(path)
		if err != nil {
			t.Fatal(err)
		}
		img, err := png.Decode(f)
		_ = f.Close()
		if err != nil {
			t.Fatalf("%s is not a PNG: %v", name, err)
		}
		if b := img.Bounds(); b.Dx() < 600 || b.Dy() < 300 {
			t.Fatalf("%s is %v", name, b)
		}
	}
	if err := benchreport.PlotScaling(filepath.Join(dir, "none.png"), nil, 50, 100); !errors.Is(err, benchreport.ErrNoData) {
		t.Fatalf("plotting nothing: %v, want ErrNoData", err)
	}
	var b strings.Builder
	meta := benchreport.Meta{Date: "2026-12-02", Machine: "test machine", ResultsFile: "bench.txt", StormQPS: -1}
	if err := benchreport.WriteMarkdown(&b, meta, sums, []string{"scaling.png", "memory.png"}); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		"| FreeLock | free Lock (PATCH register ∥ GET Machine, then CREATE) vs a raw ConfigMap Create | 14.00 ms | 7.00 ms | 2.00 | ratio ≤ 1.6 | no | 3 | 0.60 → 0.70, others 5% |",
		"| FreeLock | free Lock vs its three requests made raw in its order | 14.00 ms | 13.50 ms (raw round) | 1.04 |  |  | 3 |",
		"| FreeLockVsUpstream | free Lock vs the upstream lock's free Lock (GET, then CREATE), median | 6.80 ms | 4.00 ms (upstream CABPK lock) | 1.70 | ratio ≤ 1.2 | no | 1 |",
		"| 300 ms (upstream CABPK lock) | 1.40 | ratio ≤ 1.5 | yes | 1 | **busy** 1.20 → 3.10, **others 35%** |",
		"| 500 | 11.0 s | 10.0 s | 1.10 | 1; 1.000 | 1.050 | 2.50 (1.25) | 8.0 s (4.0 s) |",
		"| 250 | 6.0 s | 5.0 s | 1.20 | 1; – | – |",
		"| RestoreStorm/clusters=500 | restore storm: ConfigMap writes the API server served per lock (apiserver_request_total) | 1.000 | 1 (one patch) | 1.00 | exactly 1 | yes |",
		"| 5000 | 4.2 MiB | 4.0 MiB | 1.050 |",
		"![scaling](scaling.png)",
		"no client rate limit",
	} {
		if !strings.Contains(b.String(), want) {
			t.Errorf("report lacks %q:\n%s", want, b.String())
		}
	}
}

func TestPlanAndPackages(t *testing.T) {
	jobs := benchreport.Plan(benchreport.DefaultPlanOptions(), []string{"./internal/other"})
	var suffixes []string
	for _, j := range jobs {
		suffixes = append(suffixes, j.Suffix)
	}
	want := []string{"", "/callers=50", "", "/clusters=1000", "/clusters=2000", "/clusters=5000", "/clusters=10000", "/clusters=1000/qps=20", "/clusters=10000",
		"/clusters=2000", "/configmaps=0", "/configmaps=5000", "/configmaps=10000", "/configmaps=20000", "/clusters=10000", "/objects=50000", ""}
	if !reflect.DeepEqual(suffixes, want) {
		t.Fatalf("job suffixes %v, want %v", suffixes, want)
	}
	if s := jobs[1].String(); s != "(cd hack/contention && go test -run=^$ -bench=^BenchmarkContention$ -benchmem -count=1 -timeout=30m0s -benchtime=10x . -args -contention.callers=50)" {
		t.Fatalf("contention job %s", s)
	}
	if s := jobs[2].String(); s != "(cd hack/contention && go test -run=^$ -bench=^BenchmarkFreeLockVsUpstream$ -benchmem -count=1 -timeout=30m0s -benchtime=200x .)" {
		t.Fatalf("free Lock job %s", s)
	}
	if s := jobs[3].String(); !strings.Contains(s, "-bench=^BenchmarkRestoreStorm$") || !strings.Contains(s, "-args -storm.clusters=1000 -storm.qps=-1") {
		t.Fatalf("storm job %s", s)
	}
	pkgs, err := benchreport.PackagesWithBenchmarks("../..", benchreport.LibraryPkg)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range pkgs {
		if p == benchreport.LibraryPkg || strings.Contains(p, "testdata") {
			t.Fatalf("packages %v", pkgs)
		}
	}
}
