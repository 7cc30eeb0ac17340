package loadavg

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// cpuTicks are two readings of /proc, in clock ticks: the CPU time the
// whole machine spent busy (every state but idle and iowait) and over all,
// and the CPU time of this process and its descendants, those that run and
// those it has reaped.
type cpuTicks struct {
	busy, total, tree uint64
}

// readCPU reads the machine's and this process tree's CPU time.
func readCPU() (cpuTicks, error) {
	var t cpuTicks
	b, err := os.ReadFile("/proc/stat")
	if err != nil {
		return t, err
	}
	line, _, _ := strings.Cut(string(b), "\n")
	f := strings.Fields(line)
	if len(f) < 5 || f[0] != "cpu" {
		return t, fmt.Errorf("/proc/stat: unexpected first line %q", line)
	}
	for i, s := range f[1:] {
		v, err := strconv.ParseUint(s, 10, 64)
		if err != nil {
			return t, fmt.Errorf("/proc/stat: %q: %w", s, err)
		}
		// Fields: user nice system idle iowait irq softirq steal guest
		// guest_nice; guest time is already counted in user.
		if i >= 8 {
			break
		}
		t.total += v
		if i != 3 && i != 4 {
			t.busy += v
		}
	}
	t.tree, err = treeTicks(os.Getpid())
	return t, err
}

// procStat is what treeTicks needs of /proc/<pid>/stat.
type procStat struct {
	ppid  int
	ticks uint64 // utime + stime + cutime + cstime
}

// readProcStat parses /proc/<pid>/stat; the command name, in parentheses,
// may hold spaces and parentheses, so the fields are counted from its end.
func readProcStat(path string) (procStat, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return procStat{}, err
	}
	s := string(b)
	end := strings.LastIndexByte(s, ')')
	if end < 0 {
		return procStat{}, fmt.Errorf("%s: no command name", path)
	}
	// After the name: state(3) ppid(4) ... utime(14) stime(15) cutime(16) cstime(17).
	f := strings.Fields(s[end+1:])
	if len(f) < 15 {
		return procStat{}, fmt.Errorf("%s: %d fields after the name", path, len(f))
	}
	ppid, err := strconv.Atoi(f[1])
	if err != nil {
		return procStat{}, fmt.Errorf("%s: ppid %q: %w", path, f[1], err)
	}
	var ticks uint64
	for _, s := range f[11:15] {
		v, err := strconv.ParseInt(s, 10, 64)
		if err != nil {
			return procStat{}, fmt.Errorf("%s: %q: %w", path, s, err)
		}
		if v > 0 {
			ticks += uint64(v)
		}
	}
	return procStat{ppid: ppid, ticks: ticks}, nil
}

// treeTicks sums the CPU time of root and of every process below it.
// Processes that exit while /proc is walked are skipped.
func treeTicks(root int) (uint64, error) {
	paths, err := filepath.Glob("/proc/[0-9]*/stat")
	if err != nil {
		return 0, err
	}
	stats := map[int]procStat{}
	children := map[int][]int{}
	for _, p := range paths {
		pid, err := strconv.Atoi(filepath.Base(filepath.Dir(p)))
		if err != nil {
			continue
		}
		st, err := readProcStat(p)
		if err != nil {
			continue
		}
		stats[pid] = st
		children[st.ppid] = append(children[st.ppid], pid)
	}
	if _, ok := stats[root]; !ok {
		return 0, fmt.Errorf("process %d is not in /proc", root)
	}
	var sum uint64
	todo := []int{root}
	for len(todo) > 0 {
		pid := todo[len(todo)-1]
		todo = todo[:len(todo)-1]
		sum += stats[pid].ticks
		todo = append(todo, children[pid]...)
	}
	return sum, nil
}

// othersShare is the share of the machine's CPU time between a and b that
// processes outside this process tree used, from 0 to 1.
func othersShare(a, b cpuTicks) float64 {
	total := float64(b.total) - float64(a.total)
	if total <= 0 {
		return 0
	}
	others := (float64(b.busy) - float64(a.busy)) - (float64(b.tree) - float64(a.tree))
	return min(max(others/total, 0), 1)
}
