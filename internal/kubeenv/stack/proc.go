package stack

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"
)

// Proc is a process of the stack, its output going to a log file.
type Proc struct {
	// Name names the process in errors and log files.
	Name string
	// LogPath is the file its standard output and error go to.
	LogPath string

	cmd  *exec.Cmd
	done chan struct{}
	err  error
	once sync.Once
}

// startProc starts bin with args in its own process group, killed should
// the test binary die, logging into dir/name.log. env is added to the
// environment.
func startProc(dir, name, bin string, args, env []string) (*Proc, error) {
	p := &Proc{Name: name, LogPath: filepath.Join(dir, name+".log"), done: make(chan struct{})}
	logFile, err := os.Create(p.LogPath)
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(bin, args...)
	cmd.Stdout, cmd.Stderr = logFile, logFile
	cmd.Env = append(os.Environ(), env...)
	cmd.Dir = dir
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		_ = logFile.Close()
		return nil, fmt.Errorf("starting %s: %w", name, err)
	}
	p.cmd = cmd
	go func() {
		p.err = cmd.Wait()
		_ = logFile.Close()
		close(p.done)
	}()
	return p, nil
}

// Exited tells whether the process has ended.
func (p *Proc) Exited() bool {
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}

// Log returns what the process has written so far.
func (p *Proc) Log() string {
	b, _ := os.ReadFile(p.LogPath)
	return string(b)
}

// Tail returns the last n lines of the log.
func (p *Proc) Tail(n int) string {
	lines := strings.Split(strings.TrimRight(p.Log(), "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

// Stop ends the process group with SIGTERM, then SIGKILL after 10 s. It
// may be called more than once.
func (p *Proc) Stop() {
	p.once.Do(func() {
		if p.cmd == nil || p.cmd.Process == nil {
			return
		}
		_ = syscall.Kill(-p.cmd.Process.Pid, syscall.SIGTERM)
		select {
		case <-p.done:
		case <-time.After(10 * time.Second):
			_ = syscall.Kill(-p.cmd.Process.Pid, syscall.SIGKILL)
			<-p.done
		}
	})
}

// errExited is returned while waiting for a process that has ended.
var errExited = errors.New("exited")

// waitFor polls check every 100 ms until it returns nil, the process exits
// or timeout passes.
func (p *Proc) waitFor(ctx context.Context, timeout time.Duration, what string, check func(context.Context) error) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	for {
		err := check(ctx)
		if err == nil {
			return nil
		}
		select {
		case <-p.done:
			exit := p.err
			if exit == nil {
				exit = errors.New("exit status 0")
			}
			return fmt.Errorf("%s %w before %s (%w); last lines of %s:\n%s", p.Name, errExited, what, exit, p.LogPath, p.Tail(30))
		case <-ctx.Done():
			return fmt.Errorf("%s: not %s within %s: %w; last lines of %s:\n%s", p.Name, what, timeout, err, p.LogPath, p.Tail(30))
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// waitHTTP waits until url answers 200 OK.
func (p *Proc) waitHTTP(ctx context.Context, timeout time.Duration, url string) error {
	return p.waitFor(ctx, timeout, "serving "+url, func(ctx context.Context) error {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
		if err != nil {
			return err
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			return err
		}
		_ = resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			return fmt.Errorf("%s answered %s", url, resp.Status)
		}
		return nil
	})
}

// waitLogLine waits for a line of the log that starts with prefix and
// returns the rest of it.
func (p *Proc) waitLogLine(ctx context.Context, timeout time.Duration, prefix string) (string, error) {
	var rest string
	err := p.waitFor(ctx, timeout, "logging "+prefix, func(context.Context) error {
		sc := bufio.NewScanner(strings.NewReader(p.Log()))
		for sc.Scan() {
			if r, ok := strings.CutPrefix(sc.Text(), prefix); ok {
				rest = r
				return nil
			}
		}
		return errors.New("no such line yet")
	})
	return rest, err
}

// FreePort returns a TCP port on 127.0.0.1 that nothing listens on now.
func FreePort() (int, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer func() { _ = ln.Close() }()
	return ln.Addr().(*net.TCPAddr).Port, nil
}

// freeAddrs returns n addresses 127.0.0.1:port with distinct free ports.
func freeAddrs(n int) ([]string, error) {
	var lns []net.Listener
	defer func() {
		for _, ln := range lns {
			_ = ln.Close()
		}
	}()
	out := make([]string, n)
	for i := range out {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, err
		}
		lns = append(lns, ln)
		out[i] = ln.Addr().String()
	}
	return out, nil
}
