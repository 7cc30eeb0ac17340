package stack

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	"github.com/initlock/initlock/internal/kubeenv"
)

// Proc is a process of the stack, its output going to a log file: a
// kubeenv.Process, with the waits the stack starts it with.
type Proc struct {
	*kubeenv.Process
}

// startProc starts bin with args in dir, logging into dir/name.log, as
// kubeenv.StartLogged does. env is added to the environment.
func startProc(dir, name, bin string, args, env []string) (*Proc, error) {
	cmd := exec.Command(bin, args...)
	cmd.Env = append(os.Environ(), env...)
	cmd.Dir = dir
	p, err := kubeenv.StartLogged(name, cmd, filepath.Join(dir, name+".log"))
	if err != nil {
		return nil, err
	}
	return &Proc{Process: p}, nil
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
		case <-p.Done():
			exit := p.Err()
			if exit == nil {
				exit = errors.New("exit status 0")
			}
			return fmt.Errorf("%s %w before %s (%w); last lines of %s:\n%s\n(%s exited before %s)", p.Name, errExited, what, exit, p.LogPath, p.Tail(30), p.Name, what)
		case <-ctx.Done():
			return fmt.Errorf("%s: not %s within %s: %w; last lines of %s:\n%s\n(%s: not %s within %s)", p.Name, what, timeout, err, p.LogPath, p.Tail(30), p.Name, what, timeout)
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// waitHTTP waits until url answers 200 OK.
func (p *Proc) waitHTTP(ctx context.Context, timeout time.Duration, url string) error {
	return p.waitFor(ctx, timeout, "serving "+url, func(ctx context.Context) error {
		_, err := httpGet(ctx, url)
		return err
	})
}

// startReady starts bin with args in m's folder as startProc does and
// waits until it answers 200 OK on http://readyAddr/readyz.
func (m *Mgmt) startReady(ctx context.Context, name, bin, readyAddr string, args []string) (*Proc, error) {
	p, err := startProc(m.Dir, name, bin, args, nil)
	if err != nil {
		return nil, err
	}
	if err := p.waitHTTP(ctx, 2*time.Minute, "http://"+readyAddr+"/readyz"); err != nil {
		p.Stop()
		return nil, err
	}
	return p, nil
}

// httpGet returns the body of a GET of url.
func httpGet(ctx context.Context, url string) (string, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return "", err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return "", err
	}
	defer func() { _ = resp.Body.Close() }()
	b, err := io.ReadAll(resp.Body)
	if err == nil && resp.StatusCode != http.StatusOK {
		err = fmt.Errorf("GET %s: %s", url, resp.Status)
	}
	return string(b), err
}

// waitLogLine waits for a line of the log that starts with prefix and
// returns the rest of it.
func (p *Proc) waitLogLine(ctx context.Context, timeout time.Duration, prefix string) (string, error) {
	var rest string
	err := p.waitFor(ctx, timeout, "logging "+prefix, func(context.Context) error {
		// Only whole lines: the process may be writing the last one.
		text := p.Log()
		sc := bufio.NewScanner(strings.NewReader(text[:strings.LastIndexByte(text, '\n')+1]))
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
