package main

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// controlPlane are the names of the processes the demo starts, as the
// kernel keeps them: cut at 15 characters ("kube-controller" for
// kube-controller-manager).
var controlPlane = []string{"etcd", "kube-apiserver", "kube-controller"}

// TestDemo runs the whole demo in this process, as make demo does, and
// checks that every step passes and that nothing is left behind: no child
// process and no temporary file.
func TestDemo(t *testing.T) {
	tmp := t.TempDir()
	t.Setenv("TMPDIR", tmp)

	seen := watchChildren(t, os.Getpid())
	var out, errOut bytes.Buffer
	code := run(nil, &out, &errOut)
	started := seen.stop()
	t.Logf("demo output:\n%s", out.String())
	if code != 0 {
		t.Fatalf("demo exited %d, want 0; stderr:\n%s", code, errOut.String())
	}
	text := out.String()
	for _, want := range []string{
		"verdict unowned",
		"the restore may still",
		"initlock-manager re-adopts the lock",
		"event LockAdopted on Cluster seed",
		"demo-seed  seed     seed-cp-0  yes            missing",
		"demo-seed  seed     seed-cp-0  yes            ok",
		"deleted", "after its Cluster",
		"event LockReleased on Cluster solo",
		"MachineSet/graph-md-0-7f9c               -> MachineDeployment/graph-md-0",
		"the 5 owned objects were deleted", "the lock by initlock-manager once its holder Machine was gone",
		// The seed lock is adopted once; the graph's lock may be linked by
		// the relinker or adopted by the lock controller, whichever acts first.
		"initlock_lock_adoptions_total ",
		" 0 FAIL, 0 SKIP",
		"Stopped initlock-manager, kube-controller-manager, kube-apiserver and etcd",
	} {
		if !strings.Contains(text, want) {
			t.Errorf("output lacks %q", want)
		}
	}
	checkCleanedUp(t, started, tmp)
}

// TestInterrupt runs the demo binary and interrupts it as Ctrl-C does:
// during the start of the control plane, in the middle of the story, and
// while --keep leaves everything running. Each time it must stop every
// process it started and remove its temporary files.
func TestInterrupt(t *testing.T) {
	bin := buildDemo(t)
	tests := []struct {
		name string
		args []string
		// at is the output line that triggers the interrupt.
		at       string
		wantCode int
		// keep: the control plane must answer with the kubeconfig printed.
		keep bool
	}{
		{name: "while the control plane starts", at: "[ 2] Start etcd", wantCode: 130},
		{name: "in the middle of the story", at: "[10] A slow restore", wantCode: 130},
		{name: "with --keep after the story", args: []string{"--keep"}, at: "Press Ctrl-C", wantCode: 0, keep: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tmp := t.TempDir()
			cmd := exec.Command(bin, tt.args...)
			cmd.Env = append(os.Environ(), "TMPDIR="+tmp)
			stdout, err := cmd.StdoutPipe()
			if err != nil {
				t.Fatal(err)
			}
			var stderr bytes.Buffer
			cmd.Stderr = &stderr
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = cmd.Process.Kill() })
			seen := watchChildren(t, cmd.Process.Pid)

			var out strings.Builder
			lines := bufio.NewScanner(stdout)
			kubeconfig := ""
			found := false
			for lines.Scan() {
				line := lines.Text()
				out.WriteString(line + "\n")
				if k, ok := strings.CutPrefix(strings.TrimSpace(line), "export KUBECONFIG="); ok {
					kubeconfig = k
				}
				if strings.Contains(line, tt.at) {
					found = true
					break
				}
			}
			if !found {
				_ = cmd.Wait()
				t.Fatalf("the demo never printed %q; output:\n%s\nstderr:\n%s", tt.at, out.String(), stderr.String())
			}
			if tt.keep {
				checkServes(t, kubeconfig)
			}
			if err := cmd.Process.Signal(os.Interrupt); err != nil {
				t.Fatal(err)
			}
			rest, _ := io.ReadAll(stdout)
			out.Write(rest)
			err = cmd.Wait()
			started := seen.stop()
			t.Logf("demo output:\n%s", out.String())
			if code := cmd.ProcessState.ExitCode(); code != tt.wantCode {
				t.Errorf("exit code %d (%v), want %d; stderr:\n%s", code, err, tt.wantCode, stderr.String())
			}
			if !strings.Contains(out.String(), "Stopped initlock-manager, kube-controller-manager, kube-apiserver and etcd") {
				t.Errorf("the demo did not report its clean-up")
			}
			checkCleanedUp(t, started, tmp)
			if tt.keep {
				if _, err := os.Stat(kubeconfig); !errors.Is(err, os.ErrNotExist) {
					t.Errorf("kubeconfig %s left behind (stat: %v)", kubeconfig, err)
				}
			}
		})
	}
}

// buildDemo builds the demo binary once for the test.
func buildDemo(t *testing.T) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "initlock-demo")
	cmd := exec.Command("go", "build", "-o", bin, ".")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("building the demo: %v\n%s", err, out)
	}
	return bin
}

// checkServes lists namespaces with the kubeconfig the demo printed.
func checkServes(t *testing.T, kubeconfig string) {
	t.Helper()
	if kubeconfig == "" {
		t.Fatal("the demo printed no kubeconfig")
	}
	cfg, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	if err != nil {
		t.Fatalf("reading kubeconfig %s: %v", kubeconfig, err)
	}
	c, err := client.New(cfg, client.Options{})
	if err != nil {
		t.Fatal(err)
	}
	var list corev1.NamespaceList
	if err := c.List(t.Context(), &list); err != nil {
		t.Fatalf("the control plane does not answer with the printed kubeconfig: %v", err)
	}
	names := map[string]bool{}
	for _, ns := range list.Items {
		names[ns.Name] = true
	}
	for _, want := range []string{"demo-seed", "demo-single-node"} {
		if !names[want] {
			t.Errorf("namespace %s missing while the demo keeps running", want)
		}
	}
}

// checkCleanedUp checks that none of the control-plane processes seen is
// still running and that the temporary folder is empty.
func checkCleanedUp(t *testing.T, started map[int]string, tmp string) {
	t.Helper()
	names := map[string]bool{}
	for _, name := range started {
		names[name] = true
	}
	for _, want := range controlPlane {
		if !names[want] {
			t.Errorf("never saw %s running as a child of the demo (saw %v)", want, started)
		}
	}
	for pid, name := range started {
		if now, err := readComm(pid); err == nil && now == name {
			t.Errorf("%s (pid %d) still runs after the demo ended", name, pid)
			_ = syscall.Kill(pid, syscall.SIGKILL)
		}
	}
	entries, err := os.ReadDir(tmp)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		t.Errorf("left behind in the temporary folder: %s", filepath.Join(tmp, e.Name()))
	}
}

// childWatcher records the control-plane processes whose parent is pid.
type childWatcher struct {
	cancel context.CancelFunc
	done   chan struct{}
	mu     sync.Mutex
	seen   map[int]string
}

func watchChildren(t *testing.T, parent int) *childWatcher {
	t.Helper()
	ctx, cancel := context.WithCancel(context.WithoutCancel(t.Context()))
	w := &childWatcher{cancel: cancel, done: make(chan struct{}), seen: map[int]string{}}
	go func() {
		defer close(w.done)
		for {
			for pid, name := range children(parent) {
				w.mu.Lock()
				w.seen[pid] = name
				w.mu.Unlock()
			}
			select {
			case <-ctx.Done():
				return
			case <-time.After(100 * time.Millisecond):
			}
		}
	}()
	t.Cleanup(func() { w.stop() })
	return w
}

// stop ends the watch and returns the processes seen.
func (w *childWatcher) stop() map[int]string {
	w.cancel()
	<-w.done
	w.mu.Lock()
	defer w.mu.Unlock()
	return maps.Clone(w.seen)
}

// children returns the control-plane processes whose parent is parent:
// those its threads started.
func children(parent int) map[int]string {
	out := map[int]string{}
	lists, _ := filepath.Glob(fmt.Sprintf("/proc/%d/task/*/children", parent))
	for _, l := range lists {
		b, err := os.ReadFile(l)
		if err != nil {
			continue
		}
		for _, f := range strings.Fields(string(b)) {
			pid, _ := strconv.Atoi(f)
			if name, err := readComm(pid); err == nil && slices.Contains(controlPlane, name) {
				out[pid] = name
			}
		}
	}
	return out
}

func readComm(pid int) (string, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/comm", pid))
	if err != nil {
		return "", err
	}
	return strings.TrimSpace(string(b)), nil
}
