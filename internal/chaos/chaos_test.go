package chaos_test

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/initlock/initlock/internal/chaos"
	"github.com/initlock/initlock/internal/kubeenv"
	"github.com/initlock/initlock/internal/kubeenv/faults"
)

var env *kubeenv.Env

// TestMain starts the control plane with the lock guard the manager ships
// installed, as on a management cluster.
func TestMain(m *testing.M) { kubeenv.Main(m, kubeenv.Options{LockGuard: true}, &env) }

// The chaos run is configured from the environment, so that make chaos can
// pass SEED and RUNS through go test:
//
//	CHAOS_SEED  seed of the first scenario (default: from the clock); scenario
//	            i has seed CHAOS_SEED+i, so one failing scenario replays with
//	            CHAOS_SEED=<its seed> CHAOS_RUNS=1
//	CHAOS_RUNS  number of scenarios (default 30, 8 with -short)
//	CHAOS_SIZE  short or long (default short)
//	CHAOS_OUT   folder for the histories of failed scenarios and the
//	            managers' logs (default: a temporary folder; histories go
//	            to the test log)
//	CHAOS_HISTORY  "all" writes every scenario's history into CHAOS_OUT, not
//	            only the failed ones'
//	CHAOS_MANAGER_BIN  a built initlock-manager (default: built here)
type chaosConfig struct {
	seed uint64
	runs int
	size chaos.Size
	out  string
}

func config(t *testing.T) chaosConfig {
	t.Helper()
	c := chaosConfig{seed: uint64(time.Now().UnixNano() % 1_000_000_000), runs: 30, size: chaos.SizeShort}
	if testing.Short() {
		c.runs = 8
	}
	if v := os.Getenv("CHAOS_SEED"); v != "" {
		n, err := strconv.ParseUint(v, 10, 64)
		if err != nil {
			t.Fatalf("CHAOS_SEED=%q: %v", v, err)
		}
		c.seed = n
	}
	if v := os.Getenv("CHAOS_RUNS"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 {
			t.Fatalf("CHAOS_RUNS=%q: want a positive number", v)
		}
		c.runs = n
	}
	switch v := os.Getenv("CHAOS_SIZE"); v {
	case "", "short":
	case "long":
		c.size = chaos.SizeLong
	default:
		t.Fatalf("CHAOS_SIZE=%q: want short or long", v)
	}
	c.out = os.Getenv("CHAOS_OUT")
	if c.out == "" {
		c.out = t.TempDir()
	} else if err := os.MkdirAll(c.out, 0o755); err != nil {
		t.Fatal(err)
	}
	return c
}

// managerBinary builds cmd/initlock-manager for the test, unless
// CHAOS_MANAGER_BIN names one.
func managerBinary(t *testing.T) string {
	t.Helper()
	if bin := os.Getenv("CHAOS_MANAGER_BIN"); bin != "" {
		return bin
	}
	bin := filepath.Join(t.TempDir(), "initlock-manager")
	out, err := exec.Command("go", "build", "-o", bin, "github.com/initlock/initlock/cmd/initlock-manager").CombinedOutput()
	if err != nil {
		t.Fatalf("building initlock-manager: %v\n%s", err, out)
	}
	return bin
}

// TestChaos runs randomised scenarios against the real control plane,
// with the manager's real binary, and fails on any broken invariant,
// printing the seed and the history to replay it.
func TestChaos(t *testing.T) {
	cfg := config(t)
	bin := managerBinary(t)
	t.Logf("chaos: seeds %d..%d, replay one with: make chaos SEED=<seed> RUNS=1", cfg.seed, cfg.seed+uint64(cfg.runs)-1)
	var totals chaos.Totals
	for i := range cfg.runs {
		seed := cfg.seed + uint64(i)
		t.Run(fmt.Sprintf("seed=%d", seed), func(t *testing.T) {
			plan := chaos.Generate(seed, cfg.size)
			res := chaos.Run(t.Context(), chaos.Options{Config: env.Config, Client: env.Client, ManagerBinary: bin, Dir: cfg.out,
				SettleTimeout: 60 * time.Second}, plan)
			totals.Add(res)
			t.Log(res.Summary())
			if res.Failed() {
				report(t, cfg, res)
			} else if os.Getenv("CHAOS_HISTORY") == "all" {
				if _, err := writeHistory(cfg, res); err != nil {
					t.Fatal(err)
				}
			}
		})
	}
	t.Logf("chaos totals: %s", totals.String())
	// A class its plans enabled again and again, and never injected, has
	// its injection or its count broken; one enabled a few times may have
	// been skipped by chance (an action's Cluster busy or gone).
	for _, c := range totals.Faults.Missing(faults.Chaos) {
		e, _ := faults.Lookup(c)
		if n := totals.Planned[c]; n >= 8 {
			t.Errorf("fault class %s (%s): enabled by %d plans, never injected", c, e.Meaning, n)
		} else {
			t.Logf("fault class %s (%s) not exercised: enabled by %d plans", c, e.Meaning, n)
		}
	}
	if path := os.Getenv("CHAOS_TOTALS"); path != "" {
		if err := os.WriteFile(path, []byte(totals.String()+"\n"), 0o644); err != nil {
			t.Error(err)
		}
	}
}

// report fails t with the seed, the plan, the violations and the history.
func report(t *testing.T, cfg chaosConfig, res *chaos.Result) {
	t.Helper()
	var b strings.Builder
	fmt.Fprintf(&b, "scenario seed %d FAILED; replay with: make chaos SEED=%d RUNS=1", res.Plan.Seed, res.Plan.Seed)
	if cfg.size == chaos.SizeLong {
		b.WriteString(" SIZE=long")
	}
	fmt.Fprintf(&b, "\n%s", res.Plan)
	if res.Err != nil {
		fmt.Fprintf(&b, "runner error: %v\n", res.Err)
	}
	for _, v := range res.Violations {
		fmt.Fprintf(&b, "%s\n", v)
	}
	fmt.Fprintf(&b, "manager logs: %s\n", res.Dir)
	path, err := writeHistory(cfg, res)
	if err != nil || os.Getenv("CHAOS_OUT") == "" {
		b.WriteString("history:\n")
		_, _ = res.History.WriteTo(&b)
	} else {
		fmt.Fprintf(&b, "history (%d events): %s\n", len(res.History.Events()), path)
	}
	t.Error(b.String())
}

// writeHistory writes the plan and the history of a scenario into
// cfg.out, and returns the file's path.
func writeHistory(cfg chaosConfig, res *chaos.Result) (string, error) {
	path := filepath.Join(cfg.out, fmt.Sprintf("seed-%d.history", res.Plan.Seed))
	f, err := os.Create(path)
	if err != nil {
		return path, err
	}
	if _, err = fmt.Fprintf(f, "%s\n", res.Plan); err == nil {
		_, err = res.History.WriteTo(f)
	}
	return path, errors.Join(err, f.Close())
}
