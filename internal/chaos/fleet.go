package chaos

import (
	"context"
	"fmt"
	"os/exec"
	"path/filepath"
	"strconv"
	"sync"
	"time"

	"github.com/initlock/initlock/internal/kubeenv"
)

// Replica is one initlock-manager process of a Fleet.
type Replica struct {
	Name           string
	LeaderElection bool

	kubeconfig string
	log        string

	mu        sync.Mutex
	proc      *kubeenv.Process
	downUntil time.Time
	starts    int
	kills     int
	exitErr   []string
}

// Fleet runs the replicas of the initlock manager as processes of the real
// binary, each talking to the API server through the Proxy.
type Fleet struct {
	binary    string
	dir       string
	namespace string
	h         *History
	replicas  []*Replica
}

// ManagerTimings are the manager flags that make a scenario short.
type ManagerTimings struct {
	OrphanGrace, OrphanSettle time.Duration
}

// NewFleet registers the replicas with the proxy and writes their
// kubeconfigs into dir. Nothing is started yet.
func NewFleet(binary, dir, namespace string, p *Proxy, leaderElection []bool, seed uint64, h *History) (*Fleet, error) {
	f := &Fleet{binary: binary, dir: dir, namespace: namespace, h: h}
	for i, le := range leaderElection {
		name := "mgr-" + strconv.Itoa(i+1)
		kc, _, err := p.Replica(name, dir, seed+uint64(i)*7919)
		if err != nil {
			return nil, err
		}
		f.replicas = append(f.replicas, &Replica{Name: name, LeaderElection: le, kubeconfig: kc,
			log: filepath.Join(dir, name+".log")})
	}
	return f, nil
}

// Start starts replica r unless it runs.
func (f *Fleet) Start(r *Replica, t ManagerTimings) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.proc != nil {
		return nil
	}
	cmd := exec.Command(f.binary,
		"--kubeconfig="+r.kubeconfig,
		"--namespace="+f.namespace,
		"--orphan-grace="+t.OrphanGrace.String(),
		"--orphan-settle="+t.OrphanSettle.String(),
		"--release-after-init=true",
		"--concurrency=4",
		"--kube-api-qps=500",
		"--kube-api-burst=1000",
		"--metrics-bind-address=0",
		"--health-probe-bind-address=0",
		"--leader-elect="+strconv.FormatBool(r.LeaderElection),
		"--leader-election-id=initlock-chaos",
		"--leader-election-namespace="+f.namespace,
	)
	proc, err := kubeenv.StartLogged(r.Name, cmd, r.log)
	if err != nil {
		return fmt.Errorf("%s: %w", f.binary, err)
	}
	r.proc = proc
	r.starts++
	f.h.Addf("driver", "manager started", r.Name, "pid=%d leaderElection=%t", proc.Pid(), r.LeaderElection)
	go func() {
		<-proc.Done()
		r.mu.Lock()
		if r.proc == proc { // not killed: it ended by itself
			r.proc = nil
			r.exitErr = append(r.exitErr, fmt.Sprintf("%s: %v", r.Name, proc.Err()))
			f.h.Addf("driver", "manager exited", r.Name, "%v (log %s)", proc.Err(), r.log)
		}
		r.mu.Unlock()
	}()
	return nil
}

// Kill sends SIGKILL to the replica's process, if it runs, and waits for it
// to end; Supervise starts it again once down has passed. It tells whether
// there was a process to kill.
func (f *Fleet) Kill(r *Replica, down time.Duration) bool {
	r.mu.Lock()
	proc := r.proc
	if proc == nil {
		r.mu.Unlock()
		return false
	}
	r.proc = nil
	r.kills++
	r.downUntil = time.Now().Add(down)
	r.mu.Unlock()
	proc.Kill()
	f.h.Addf("driver", "manager killed", r.Name, "SIGKILL pid=%d", proc.Pid())
	return true
}

// Supervise starts, every 100 ms until ctx ends, the replicas that do not
// run and are not held down, as a Deployment restarts its Pods.
func (f *Fleet) Supervise(ctx context.Context, t ManagerTimings) error {
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	for {
		for _, r := range f.replicas {
			r.mu.Lock()
			start := r.proc == nil && time.Now().After(r.downUntil)
			r.mu.Unlock()
			if start {
				if err := f.Start(r, t); err != nil {
					return err
				}
			}
		}
		select {
		case <-ctx.Done():
			return nil
		case <-tick.C:
		}
	}
}

// StopAll kills every replica; stop Supervise first.
func (f *Fleet) StopAll() {
	for _, r := range f.replicas {
		f.Kill(r, 0)
	}
}

// Stats returns how many processes were started and killed, and the
// unexpected exits.
func (f *Fleet) Stats() (starts, kills int, exits []string) {
	for _, r := range f.replicas {
		r.mu.Lock()
		starts += r.starts
		kills += r.kills
		exits = append(exits, r.exitErr...)
		r.mu.Unlock()
	}
	return starts, kills, exits
}
