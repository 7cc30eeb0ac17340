package main

import (
	"bytes"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/initlock/initlock/test/managertest"
)

// TestCommandLine runs the binary with bad flag values, a missing
// kubeconfig, --version and --help. Every failure must be one line on
// stderr, without a stack trace, and come before any request to the API
// server: the kubeconfig points at a server that counts requests.
func TestCommandLine(t *testing.T) {
	bin := managertest.Build(t)
	var requests atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		requests.Add(1)
		http.Error(w, "not an API server", http.StatusServiceUnavailable)
	}))
	t.Cleanup(srv.Close)
	dir := t.TempDir()
	kubeconfig := filepath.Join(dir, "kubeconfig")
	kc := "apiVersion: v1\nkind: Config\nclusters:\n- name: c\n  cluster:\n    server: " + srv.URL +
		"\ncontexts:\n- name: c\n  context:\n    cluster: c\n    user: u\ncurrent-context: c\nusers:\n- name: u\n  user:\n    token: t\n"
	if err := os.WriteFile(kubeconfig, []byte(kc), 0o600); err != nil {
		t.Fatal(err)
	}
	withKubeconfig := "--kubeconfig=" + kubeconfig

	for _, tc := range []struct {
		name string
		args []string
		env  []string
		want string // in the only line of stderr
	}{
		{"unknown flag", []string{withKubeconfig, "--no-such-flag"}, nil, "flag provided but not defined: -no-such-flag"},
		{"bad duration", []string{withKubeconfig, "--orphan-grace=soon"}, nil, `invalid value "soon" for flag -orphan-grace`},
		{"zero grace", []string{withKubeconfig, "--orphan-grace=0s"}, nil, "--orphan-grace must be positive"},
		{"lease shorter than renew deadline", []string{withKubeconfig, "--leader-elect-lease-duration=5s"}, nil,
			"--leader-elect-lease-duration (5s) must be longer than --leader-elect-renew-deadline (10s)"},
		{"retry period too long", []string{withKubeconfig, "--leader-elect-retry-period=9s"}, nil,
			"--leader-elect-renew-deadline (10s) must be longer than 1.2 times --leader-elect-retry-period (9s)"},
		{"watch filter not a label value", []string{withKubeconfig, "--watch-filter=not a value"}, nil, `--watch-filter="not a value" is not a label value`},
		{"bad metrics address", []string{withKubeconfig, "--metrics-bind-address=8443"}, nil, `--metrics-bind-address="8443" is not host:port or 0`},
		{"two bad values", []string{withKubeconfig, "--orphan-grace=-1m", "--concurrency=-1"}, nil,
			"--orphan-grace must be positive, got -1m0s; --concurrency must not be negative, got -1"},
		{"negative event budget", []string{withKubeconfig, "--event-qps=-1"}, nil, "--event-qps and --event-burst must not be negative, got -1 and 100"},
		{"event qps not a number", []string{withKubeconfig, "--event-qps=often"}, nil, `invalid value "often" for flag -event-qps`},
		{"bad relink kind", []string{withKubeconfig, "--relink-kinds=machine"}, nil, `--relink-kinds: kind "machine"`},
		{"secrets without opting in", []string{withKubeconfig, "--relink-kinds=ConfigMap,Secret"}, nil,
			"--relink-kinds names Secret: relinking Secrets is opt-in, add --relink-secrets and grant the ClusterRole of config/relink-secrets"},
		{"arguments", []string{withKubeconfig, "extra"}, nil, `unexpected arguments ["extra"]`},
		{"kubeconfig missing", []string{"--kubeconfig=" + filepath.Join(dir, "nope")}, nil, "--kubeconfig=" + filepath.Join(dir, "nope") + ": stat "},
		{"no kubeconfig at all", nil, []string{"HOME=" + dir, "KUBECONFIG="}, "no kubeconfig: pass --kubeconfig, set KUBECONFIG, or run in a Pod with a ServiceAccount token"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var stdout, stderr bytes.Buffer
			cmd := exec.CommandContext(t.Context(), bin, tc.args...)
			cmd.Stdout, cmd.Stderr = &stdout, &stderr
			cmd.Env = append(os.Environ(), tc.env...)
			err := cmd.Run()
			if code := cmd.ProcessState.ExitCode(); code != 1 {
				t.Fatalf("exit code %d (%v), want 1; stderr:\n%s", code, err, stderr.String())
			}
			lines := strings.Split(strings.TrimSuffix(stderr.String(), "\n"), "\n")
			if len(lines) != 1 || !strings.HasPrefix(lines[0], "initlock-manager: ") || !strings.Contains(lines[0], tc.want) {
				t.Fatalf("stderr = %q, want one line with %q", stderr.String(), tc.want)
			}
			if stdout.Len() > 0 {
				t.Errorf("stdout = %q, want nothing", stdout.String())
			}
		})
	}
	if n := requests.Load(); n != 0 {
		t.Errorf("%d requests reached the API server; flags must be checked before connecting", n)
	}

	out, err := exec.CommandContext(t.Context(), bin, "--version").Output()
	if want := "initlock-manager v0.0.0-test (" + runtime.Version() + ", " + runtime.GOOS + "/" + runtime.GOARCH + ")\n"; err != nil || string(out) != want {
		t.Errorf("--version = %q (%v), want %q", out, err, want)
	}

	help, err := exec.CommandContext(t.Context(), bin, "--help").Output()
	if err != nil {
		t.Fatalf("--help: %v", err)
	}
	sections := strings.Split(string(help), "\n\n")
	find := func(flag string) int {
		for i, s := range sections {
			if strings.Contains(s, "\n  -"+flag+" ") || strings.Contains(s, "\n  -"+flag+"\n") {
				return i
			}
		}
		return -1
	}
	own, zapSection, klogSection := find("orphan-grace"), find("zap-log-level"), find("v")
	if own < 0 || zapSection < 0 || klogSection < 0 || own == zapSection || zapSection == klogSection || own == klogSection {
		t.Fatalf("--help does not show the manager's, zap's and klog's flags in sections of their own:\n%s", help)
	}
	for _, hidden := range []string{"log_dir", "logtostderr", "skip_headers"} {
		if find(hidden) >= 0 {
			t.Errorf("--help shows klog's -%s", hidden)
		}
	}
}
