//go:build real

package real_test

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/cli-runtime/pkg/genericiooptions"

	"github.com/initlock/initlock/internal/cli"
	"github.com/initlock/initlock/internal/kubeenv"
	"github.com/initlock/initlock/internal/kubeenv/stack"
)

// Users the API server's audit log names the components by.
const (
	userCABPK   = "capi-kubeadm-bootstrap-manager"
	userCore    = "capi-manager"
	userManager = stack.ManagerUser
	// userGC runs kubeenv's garbage collector and namespace controller.
	userGC = kubeenv.CollectorUser
)

// suffix returns a short random suffix for names shared through the bucket.
func suffix() string {
	b := make([]byte, 3)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// eventually is kubeenv.Eventually with stack.Poll's context.
func eventually(t *testing.T, timeout time.Duration, f func(context.Context) error) {
	t.Helper()
	if err := stack.Poll(t.Context(), timeout, f); err != nil {
		t.Fatal(err)
	}
}

// waitLockHeld waits until the Cluster's lock exists and names machine.
func waitLockHeld(t *testing.T, m *stack.Mgmt, ns, cluster, machine string) *corev1.ConfigMap {
	t.Helper()
	cm, err := m.WaitLockHeld(t.Context(), ns, cluster, machine)
	must(t, err)
	return cm
}

// createHeld creates, in namespace ns of m, a Cluster and its control-plane
// Machine machine, waits until CABPK has given machine the lock, then for
// ready unless it is nil, and returns the lock as first seen held.
func createHeld(ctx context.Context, m *stack.Mgmt, ns, cluster, machine string, ready func(context.Context) error) (*corev1.ConfigMap, error) {
	if err := m.CreateCluster(ctx, ns, cluster, stack.ClusterOptions{}); err != nil {
		return nil, err
	}
	if err := m.CreateMachine(ctx, ns, cluster, machine, true); err != nil {
		return nil, err
	}
	cm, err := m.WaitLockHeld(ctx, ns, cluster, machine)
	if err != nil || ready == nil {
		return cm, err
	}
	return cm, stack.Poll(ctx, time.Minute, ready)
}

// machineExists tells whether the Machine name exists in namespace ns of m.
func machineExists(t *testing.T, m *stack.Mgmt, ns, name string) bool {
	t.Helper()
	u, err := m.Get(t.Context(), stack.MachineGVK, ns, name)
	must(t, err)
	return u != nil
}

// markProvisioned reports the LocalCluster cluster and the LocalMachine
// machine of namespace ns of m provisioned, as the infrastructure provider
// does again after a restore, a copy or a move, which do not carry status.
func markProvisioned(t *testing.T, m *stack.Mgmt, ns, cluster, machine string) {
	t.Helper()
	must(t, m.MarkProvisioned(t.Context(), stack.LocalClusterGVK, ns, cluster))
	must(t, m.MarkProvisioned(t.Context(), stack.LocalMachineGVK, ns, machine))
}

// snapshot reads the Cluster graph of namespace ns.
func snapshot(t *testing.T, m *stack.Mgmt, ns string) []*unstructured.Unstructured {
	t.Helper()
	objs, err := m.Graph(t.Context(), ns)
	must(t, err)
	return objs
}

// cleanupNamespace deletes ns when t ends, without waiting.
func cleanupNamespace(t *testing.T, m *stack.Mgmt, ns string) {
	t.Cleanup(func() {
		_ = m.Client.Delete(context.WithoutCancel(t.Context()), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}})
	})
}

// cabpkBinary returns the CABPK built with patch that $env names (make
// test-real builds it, hack/cabpk-initlock.sh); unset, it fails t.
func cabpkBinary(t *testing.T, env, patch string) string {
	t.Helper()
	bin := os.Getenv(env)
	if bin == "" {
		t.Fatalf("$%s is not set: run the suite with 'make test-real', which builds CABPK with %s (hack/cabpk-initlock.sh)", env, patch)
	}
	return bin
}

// startMgmt starts a management cluster of the test's own with opts, and
// stops it when the test ends.
func startMgmt(t *testing.T, opts stack.Options) *stack.Mgmt {
	t.Helper()
	bins, err := stack.FindBinaries()
	must(t, err)
	m, err := stack.StartMgmt(t.Context(), bins, opts)
	must(t, err)
	t.Cleanup(func() {
		if err := m.Stop(); err != nil {
			t.Error(err)
		}
	})
	return m
}

// startVelero starts m's Velero server for the test, with initlock's plugin
// if initlockPlugin. The server is stopped when the test ends, failed or
// not: only one Velero server can run on the machine (it always binds
// :8080), so a server left running would fail every later scenario.
func startVelero(t *testing.T, m *stack.Mgmt, initlockPlugin bool) *stack.Velero {
	t.Helper()
	v, err := m.StartVelero(t.Context(), initlockPlugin)
	must(t, err)
	t.Cleanup(m.StopVelero)
	return v
}

// velero runs the velero CLI against m's server, logging the command as a
// user would type it.
func veleroCLI(t *testing.T, v *stack.Velero, args ...string) string {
	t.Helper()
	t.Logf("$ velero %s", strings.Join(args, " "))
	out, err := v.CLI(t.Context(), args...)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// backupNamespace backs ns up with the real Velero server and returns the
// Backup's name.
func backupNamespace(t *testing.T, v *stack.Velero, ns string) string {
	t.Helper()
	name := "b-" + suffix()
	t.Logf("$ velero %s", strings.Join(stack.BackupArgs(name, ns), " "))
	must(t, v.BackupNamespace(t.Context(), name, ns))
	return name
}

// restoreBackup restores a backup with the real Velero server, with the
// velero CLI's extra arguments, and returns when the Restore is done.
func restoreBackup(t *testing.T, v *stack.Velero, backup string, args ...string) (name string, done time.Time) {
	t.Helper()
	name = "r-" + suffix()
	t.Logf("$ velero %s", strings.Join(stack.RestoreArgs(name, backup, args...), " "))
	must(t, v.RestoreBackup(t.Context(), name, backup, args...))
	return name, time.Now()
}

// auditWrites returns the writes of m's audit log that keep accepts.
func auditWrites(t *testing.T, m *stack.Mgmt, keep func(stack.Write) bool) []stack.Write {
	t.Helper()
	all, err := m.Writes()
	must(t, err)
	return slices.DeleteFunc(all, func(w stack.Write) bool { return !keep(w) })
}

// writesBy returns the writes of user in namespace ns, from the audit log.
func writesBy(t *testing.T, m *stack.Mgmt, user, ns string, since time.Time) []stack.Write {
	t.Helper()
	return auditWrites(t, m, func(w stack.Write) bool { return w.User == user && w.Namespace == ns && !w.At.Before(since) })
}

func describeWrites(ws []stack.Write) string {
	counts := map[string]int{}
	for _, w := range ws {
		r := w.Resource
		if w.Subresource != "" {
			r += "/" + w.Subresource
		}
		counts[w.Verb+" "+r]++
	}
	var parts []string
	for k, n := range counts {
		parts = append(parts, fmt.Sprintf("%d %s", n, k))
	}
	slices.Sort(parts)
	return strings.Join(parts, ", ")
}

// startManager starts initlock-manager in m as installed for a management
// cluster with CABPK (installManager): the lock guard, config/rbac's role,
// and the bootstrap and infrastructure kinds added to the relinker's
// (stack.ProviderRelinkKinds) with the permissions they need. args are
// added to its flags.
func startManager(t *testing.T, m *stack.Mgmt, args ...string) {
	t.Helper()
	must(t, m.GrantProviderKinds(t.Context()))
	must(t, m.GrantRelinkSecrets(t.Context()))
	installManager(t, m, stack.ManagerOptions{Args: append([]string{"--relink-kinds=" + stack.ProviderRelinkKinds, "--relink-secrets"}, args...)})
}

// installManager starts initlock-manager in m with opts: with its lock
// guard unless opts.NoLockGuard. When t ends, the manager is stopped and
// the guard removed, so that the next test starts with neither.
func installManager(t *testing.T, m *stack.Mgmt, opts stack.ManagerOptions) {
	t.Helper()
	t.Cleanup(func() {
		m.StopManager()
		if err := m.RemoveLockGuard(context.WithoutCancel(t.Context())); err != nil {
			t.Error(err)
		}
	})
	_, err := m.StartManager(t.Context(), opts)
	must(t, err)
}

// baseline returns the options of an earlier build of initlock-manager
// to compare with, when $INITLOCK_BASELINE_MANAGER names its binary:
// $INITLOCK_BASELINE_ROLE its ClusterRole (config/rbac/role.yaml of its
// release) and $INITLOCK_BASELINE_ARGS its flags, separated by spaces. It
// runs without this tree's lock guard. The scenarios that take it report
// its figures next to the current build's and assert nothing about it.
func baseline() (stack.ManagerOptions, bool) {
	bin := os.Getenv("INITLOCK_BASELINE_MANAGER")
	if bin == "" {
		return stack.ManagerOptions{}, false
	}
	return stack.ManagerOptions{Binary: bin, RoleFile: os.Getenv("INITLOCK_BASELINE_ROLE"), NoLockGuard: true,
		Args: strings.Fields(os.Getenv("INITLOCK_BASELINE_ARGS"))}, true
}

// guardRefusals counts the deletes of configmap name in ns that the API
// server refused (403: the lock guard), by user ("" for anyone), from the
// audit log.
func guardRefusals(t *testing.T, m *stack.Mgmt, user, ns, name string) int {
	t.Helper()
	return len(auditWrites(t, m, func(w stack.Write) bool {
		return (user == "" || w.User == user) && w.Namespace == ns && w.Verb == "delete" && w.Resource == "configmaps" && w.Name == name && w.Code == 403
	}))
}

// lockGone returns a check that cluster's lock in namespace ns of m is gone.
func lockGone(m *stack.Mgmt, ns, cluster string) func(context.Context) error {
	return func(ctx context.Context) error { return kubeenv.LockGone(ctx, m.Client, ns, cluster)() }
}

// lockOwned tells, with an error saying why not, whether cluster's lock in
// namespace ns exists and is owned by the live Cluster only.
func lockOwned(ctx context.Context, m *stack.Mgmt, ns, cluster string) error {
	c, err := m.Get(ctx, stack.ClusterGVK, ns, cluster)
	if err != nil {
		return err
	}
	if c == nil {
		return errors.New("no cluster")
	}
	cm, err := kubeenv.GetLock(ctx, m.Client, ns, cluster)
	if err != nil {
		return err
	}
	if cm == nil {
		return errors.New("no lock")
	}
	return kubeenv.LockOwnedBy(cm, c)
}

// initlockCLI runs kubectl initlock with args in m, as an operator
// (system:masters) types it, logs the command and what it printed, and
// returns that: stderr, then stdout, as a terminal shows them. An exit code
// other than 0 fails t.
func initlockCLI(t *testing.T, m *stack.Mgmt, args ...string) string {
	t.Helper()
	printed, code := initlockExit(t, m, args...)
	if code != cli.ExitOK {
		t.Fatalf("kubectl initlock %s: exit code %d", strings.Join(args, " "), code)
	}
	return printed
}

// initlockExit is initlockCLI for a command that may fail or refuse: it
// returns the exit code with what was printed.
func initlockExit(t *testing.T, m *stack.Mgmt, args ...string) (string, int) {
	t.Helper()
	kubeconfig, err := m.Env.WriteKubeconfig("operator", []string{"system:masters"})
	must(t, err)
	var out, errOut bytes.Buffer
	code := cli.Execute(t.Context(), cli.Options{IOStreams: genericiooptions.IOStreams{In: strings.NewReader(""), Out: &out, ErrOut: &errOut}},
		append(slices.Clone(args), "--kubeconfig", kubeconfig))
	printed := errOut.String() + out.String()
	t.Logf("$ kubectl initlock %s\n%s", strings.Join(args, " "), printed)
	return printed, code
}
