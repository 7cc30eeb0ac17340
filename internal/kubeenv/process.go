package kubeenv

import (
	"bytes"
	"fmt"
	"os/exec"
	"sync"
	"syscall"
	"testing"
	"time"
)

// Process is a binary a test runs next to the control plane, with its
// output kept for the test's log.
type Process struct {
	name   string
	cmd    *exec.Cmd
	logs   syncBuffer
	exited chan error
}

// StartProcess starts cmd, its standard output and error kept together.
// When t ends the process is killed if it still runs, and its output is
// logged if t failed.
func StartProcess(t testing.TB, name string, cmd *exec.Cmd) *Process {
	t.Helper()
	p := &Process{name: name, cmd: cmd, exited: make(chan error, 1)}
	cmd.Stdout, cmd.Stderr = &p.logs, &p.logs
	if err := cmd.Start(); err != nil {
		t.Fatalf("starting %s: %v", name, err)
	}
	go func() { p.exited <- cmd.Wait() }()
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		if err := <-p.exited; err != nil {
			t.Logf("%s ended: %v", name, err)
		}
		if t.Failed() {
			t.Logf("%s output:\n%s", name, p.logs.String())
		}
	})
	return p
}

// Output is what the process has written so far.
func (p *Process) Output() string { return p.logs.String() }

// Terminate sends SIGTERM and fails t unless the process exits with status
// 0 within timeout.
func (p *Process) Terminate(t testing.TB, timeout time.Duration) {
	t.Helper()
	if err := p.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatalf("signalling %s: %v", p.name, err)
	}
	select {
	case err := <-p.exited:
		p.exited <- err // for the cleanup
		if err != nil {
			t.Fatalf("%s exited with %v after SIGTERM", p.name, err)
		}
	case <-time.After(timeout):
		t.Fatalf("%s still running %s after SIGTERM", p.name, timeout)
	}
}

// syncBuffer is a bytes.Buffer safe for the process's writes and the
// test's reads.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	n, err := s.b.Write(p)
	if err != nil {
		return n, fmt.Errorf("keeping output: %w", err)
	}
	return n, nil
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}
