package kubeenv

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// stopGrace is how long Stop waits after SIGTERM before SIGKILL.
const stopGrace = 10 * time.Second

// Process is a program run next to the control plane: in a process group
// of its own, killed should this process die without stopping it, its
// standard output and error appended to a log file.
type Process struct {
	// Name names the process in errors and logs.
	Name string
	// LogPath is the file its output goes to.
	LogPath string

	cmd  *exec.Cmd
	done chan struct{}
	err  error
}

// StartLogged starts cmd, its output appended to logPath (created when
// missing). Any SysProcAttr of cmd is kept, with Setpgid and a Pdeathsig
// of SIGKILL added.
func StartLogged(name string, cmd *exec.Cmd, logPath string) (*Process, error) {
	logFile, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return nil, fmt.Errorf("opening the log of %s: %w", name, err)
	}
	cmd.Stdout, cmd.Stderr = logFile, logFile
	if cmd.SysProcAttr == nil {
		cmd.SysProcAttr = &syscall.SysProcAttr{}
	}
	cmd.SysProcAttr.Setpgid, cmd.SysProcAttr.Pdeathsig = true, syscall.SIGKILL
	if err := cmd.Start(); err != nil {
		_ = logFile.Close()
		return nil, fmt.Errorf("starting %s: %w", name, err)
	}
	p := &Process{Name: name, LogPath: logPath, cmd: cmd, done: make(chan struct{})}
	go func() {
		p.err = cmd.Wait()
		_ = logFile.Close()
		close(p.done)
	}()
	return p, nil
}

// StartProcess is StartLogged for a test, with the log in t's temporary
// folder: it fails t when cmd does not start, and when t ends it kills the
// process if it still runs and logs its output if t failed.
func StartProcess(t testing.TB, name string, cmd *exec.Cmd) *Process {
	t.Helper()
	p, err := StartLogged(name, cmd, filepath.Join(t.TempDir(), name+".log"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		p.Kill()
		if p.err != nil {
			t.Logf("%s ended: %v", name, p.err)
		}
		if t.Failed() {
			t.Logf("%s output:\n%s", name, p.Log())
		}
	})
	return p
}

// Pid is the process's id, and its process group's.
func (p *Process) Pid() int { return p.cmd.Process.Pid }

// Done is closed once the process has ended.
func (p *Process) Done() <-chan struct{} { return p.done }

// Err is what waiting for the process returned (nil for exit status 0);
// read it once Done is closed.
func (p *Process) Err() error {
	<-p.done
	return p.err
}

// Exited tells whether the process has ended.
func (p *Process) Exited() bool {
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}

// Log returns what the process has written so far.
func (p *Process) Log() string {
	b, _ := os.ReadFile(p.LogPath)
	return string(b)
}

// Tail returns the last n lines of the log.
func (p *Process) Tail(n int) string {
	lines := strings.Split(strings.TrimRight(p.Log(), "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

// Stop ends the process group with SIGTERM, then SIGKILL after 10 s, and
// waits for the process. It may be called more than once.
func (p *Process) Stop() {
	if p.Exited() {
		return
	}
	_ = syscall.Kill(-p.Pid(), syscall.SIGTERM)
	select {
	case <-p.done:
	case <-time.After(stopGrace):
		p.Kill()
	}
}

// Kill ends the process group with SIGKILL and waits for the process. It
// may be called more than once.
func (p *Process) Kill() {
	if !p.Exited() {
		_ = syscall.Kill(-p.Pid(), syscall.SIGKILL)
	}
	<-p.done
}

// Terminate sends SIGTERM to the process group and fails t unless the
// process exits with status 0 within timeout.
func (p *Process) Terminate(t testing.TB, timeout time.Duration) {
	t.Helper()
	if err := syscall.Kill(-p.Pid(), syscall.SIGTERM); err != nil {
		t.Fatalf("signalling %s: %v", p.Name, err)
	}
	select {
	case <-p.done:
		if p.err != nil {
			t.Fatalf("%s exited with %v after SIGTERM", p.Name, p.err)
		}
	case <-time.After(timeout):
		t.Fatalf("%s still running %s after SIGTERM", p.Name, timeout)
	}
}
