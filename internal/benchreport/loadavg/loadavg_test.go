package loadavg

import (
	"os"
	"os/exec"
	"path/filepath"
	"testing"
)

func TestOthersShare(t *testing.T) {
	for _, c := range []struct {
		a, b cpuTicks
		want float64
	}{
		// 200 ticks over 2 cores: 150 busy, 100 of them ours.
		{cpuTicks{busy: 1000, total: 4000, tree: 10}, cpuTicks{busy: 1150, total: 4200, tree: 110}, 0.25},
		{cpuTicks{busy: 1000, total: 4000, tree: 10}, cpuTicks{busy: 1100, total: 4200, tree: 110}, 0},
		// Our processes counted more than the machine (reaped children
		// whose time fell before a): never below 0.
		{cpuTicks{busy: 1000, total: 4000, tree: 10}, cpuTicks{busy: 1050, total: 4200, tree: 110}, 0},
		{cpuTicks{total: 5}, cpuTicks{total: 5}, 0},
	} {
		if got := othersShare(c.a, c.b); got != c.want {
			t.Errorf("othersShare(%+v, %+v) = %v, want %v", c.a, c.b, got, c.want)
		}
	}
}

func TestReadProcStat(t *testing.T) {
	p := filepath.Join(t.TempDir(), "stat")
	line := "4242 (a (b) c) S 17 4242 4242 0 -1 4194560 100 0 0 0 30 12 5 -1 20 0 1 0 100 0 0\n"
	if err := os.WriteFile(p, []byte(line), 0o600); err != nil {
		t.Fatal(err)
	}
	st, err := readProcStat(p)
	if err != nil {
		t.Fatal(err)
	}
	if st.ppid != 17 || st.ticks != 30+12+5 {
		t.Errorf("readProcStat = %+v, want ppid 17 and 47 ticks (a negative cstime counts 0)", st)
	}
}

// TestTreeTicks: the CPU time of a child this process ran and reaped is
// counted as its own.
func TestTreeTicks(t *testing.T) {
	if _, err := os.Stat("/proc/self/stat"); err != nil {
		t.Skip("no /proc")
	}
	before, err := readCPU()
	if err != nil {
		t.Fatal(err)
	}
	burn := exec.CommandContext(t.Context(), "sh", "-c", "i=0; while [ $i -lt 300000 ]; do i=$((i+1)); done")
	if err := burn.Run(); err != nil {
		t.Fatal(err)
	}
	after, err := readCPU()
	if err != nil {
		t.Fatal(err)
	}
	child := burn.ProcessState.UserTime() + burn.ProcessState.SystemTime()
	if after.tree <= before.tree || after.total <= before.total {
		t.Errorf("tree ticks %d → %d, total %d → %d, after a child that used %s: want both to grow",
			before.tree, after.tree, before.total, after.total, child)
	}
}

func TestBusy(t *testing.T) {
	for _, c := range []struct {
		m    map[string]float64
		want bool
	}{
		{map[string]float64{Before: 1.5, After: 1.9, Cores: 2}, false},
		{map[string]float64{Before: 1.5, After: 2.1, Cores: 2}, true},
		{map[string]float64{Before: 3, After: 0.5, Cores: 2}, true},
		{map[string]float64{Before: 3, After: 3}, false},
		{nil, false},
	} {
		if got := Busy(c.m); got != c.want {
			t.Errorf("Busy(%v) = %v, want %v", c.m, got, c.want)
		}
	}
}

func TestRead(t *testing.T) {
	v, ok := Read()
	if ok && v < 0 {
		t.Fatalf("load average %v", v)
	}
}
