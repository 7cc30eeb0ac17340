//go:build e2e

package e2e_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"

	"github.com/initlock/initlock/internal/kubeenv"
)

// The clusterctl inventory: its label on the CRDs move discovers kinds from,
// and the core provider every management cluster records.
const (
	clusterctlLabel     = "clusterctl.cluster.x-k8s.io"
	clusterctlGroup     = "clusterctl.cluster.x-k8s.io"
	providerNamespace   = "capi-system"
	coreProviderName    = "cluster-api"
	coreProviderType    = "CoreProvider"
	coreProviderVersion = "v1.14.2"
	// inventoryManifest is clusterctl's inventory CRD in the Cluster API
	// module.
	inventoryManifest = "cmd/clusterctl/config/manifest"
)

var (
	// source runs the garbage collector and the namespace controller, as a
	// management cluster does; target needs neither.
	source, target *kubeenv.Env
	// sourceKubeconfig and targetKubeconfig are cluster-admin kubeconfigs
	// for the move program.
	sourceKubeconfig, targetKubeconfig string
	// moveProgram is hack/capi/move: $INITLOCK_E2E_MOVE, or built once.
	moveProgram string
	// moves records every move the tests made.
	moves moveLog
)

func TestMain(m *testing.M) { os.Exit(run(m)) }

func run(m *testing.M) (code int) {
	// initlock-manager logs to stderr when INITLOCK_TEST_LOG is set.
	w := io.Discard
	if os.Getenv("INITLOCK_TEST_LOG") != "" {
		w = os.Stderr
	}
	ctrl.SetLogger(zap.New(zap.WriteTo(w), zap.UseDevMode(true)))

	// An empty KUBEBUILDER_ASSETS, left by a failed $(hack/kube.sh), would
	// make envtest look for etcd in PATH; unset, kubeenv uses the cache.
	if v, ok := os.LookupEnv("KUBEBUILDER_ASSETS"); ok && v == "" {
		if err := os.Unsetenv("KUBEBUILDER_ASSETS"); err != nil {
			return fail(err)
		}
	}

	dir, err := os.MkdirTemp("", "initlock-e2e-")
	if err != nil {
		return fail(err)
	}
	defer func() { _ = os.RemoveAll(dir) }()

	// make test-e2e builds the move program before the test binary runs,
	// so that a cold build does not count against the test timeout.
	start := time.Now()
	if moveProgram = os.Getenv("INITLOCK_E2E_MOVE"); moveProgram == "" {
		if moveProgram, err = buildMoveProgram(dir); err != nil {
			return fail(err)
		}
		fmt.Printf("e2e: built hack/capi/move in %.1fs\n", time.Since(start).Seconds())
	}

	start = time.Now()
	stop, err := startControlPlanes()
	if err != nil {
		return fail(err)
	}
	// An interrupt stops both control planes before the binary exits.
	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, os.Interrupt, syscall.SIGTERM)
	go func() {
		<-sigs
		_ = stop()
		_ = os.RemoveAll(dir)
		os.Exit(1)
	}()
	defer func() {
		signal.Stop(sigs)
		if err := stop(); err != nil {
			fmt.Fprintf(os.Stderr, "e2e: %v\n", err)
			if code == 0 {
				code = 1
			}
		}
	}()
	fmt.Printf("e2e: started two control planes in %.1fs\n", time.Since(start).Seconds())

	code = m.Run()
	moves.print(os.Stdout)
	return code
}

func fail(err error) int {
	fmt.Fprintf(os.Stderr, "e2e: %v\n", err)
	return 1
}

// buildMoveProgram builds hack/capi/move into dir with the hack/capi module,
// whose go.mod pins Cluster API v1.14.2 and its own dependency versions.
func buildMoveProgram(dir string) (string, error) {
	root, err := kubeenv.RepoRoot()
	if err != nil {
		return "", err
	}
	out := filepath.Join(dir, "move")
	cmd := exec.Command("go", "build", "-o", out, "./move")
	cmd.Dir = filepath.Join(root, "hack", "capi")
	cmd.Env = append(os.Environ(), "GOWORK=off")
	var stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stderr, &stderr
	if err := cmd.Run(); err != nil {
		return "", fmt.Errorf("building hack/capi/move: %w\n%s", err, stderr.String())
	}
	return out, nil
}

// startControlPlanes starts the source and the target, each with the
// Cluster API v1.14.2 CRDs and clusterctl's inventory CRD from the same
// module and initlock's lock guard (clusterctl move deletes the lock from
// the source: the guard lets it), and prepares them as clusterctl init
// would have.
func startControlPlanes() (stop func() error, err error) {
	capiDir, err := kubeenv.ModuleDir("hack/capi", "sigs.k8s.io/cluster-api")
	if err != nil {
		return nil, err
	}
	inventory := []string{filepath.Join(capiDir, inventoryManifest)}
	opts := []kubeenv.Options{
		{CAPI: kubeenv.CAPIV1Beta2, CRDDirs: inventory, LockGuard: true},
		{CAPI: kubeenv.CAPIV1Beta2, CRDDirs: inventory, NoControllerManager: true, LockGuard: true},
	}
	var envs []*kubeenv.Env
	stop = func() error {
		var errs []error
		for _, e := range envs {
			errs = append(errs, e.Stop())
		}
		return errors.Join(errs...)
	}
	// One after the other: starting both at once only makes them compete
	// for the same cores.
	for _, o := range opts {
		e, err := kubeenv.Start(o)
		if err != nil {
			return nil, errors.Join(err, stop())
		}
		envs = append(envs, e)
	}
	source, target = envs[0], envs[1]
	for _, c := range []struct {
		env  *kubeenv.Env
		path *string
	}{{source, &sourceKubeconfig}, {target, &targetKubeconfig}} {
		if err := prepareManagementCluster(context.Background(), c.env); err != nil {
			return nil, errors.Join(err, stop())
		}
		if *c.path, err = c.env.WriteKubeconfig("clusterctl", []string{"system:masters"}); err != nil {
			return nil, errors.Join(err, stop())
		}
	}
	return stop, nil
}

// prepareManagementCluster does what "clusterctl init" leaves behind and
// move relies on: the clusterctl label on the core provider's CRDs (move
// discovers kinds only from labelled CRDs) and the core provider in the
// inventory (move checks the target has every provider the source has).
func prepareManagementCluster(ctx context.Context, e *kubeenv.Env) error {
	crds := &apiextensionsv1.CustomResourceDefinitionList{}
	if err := e.Client.List(ctx, crds); err != nil {
		return fmt.Errorf("listing CRDs: %w", err)
	}
	labelled := 0
	for i := range crds.Items {
		crd := &crds.Items[i]
		if !strings.HasSuffix(crd.Spec.Group, "cluster.x-k8s.io") || crd.Spec.Group == clusterctlGroup {
			continue
		}
		patch := client.MergeFrom(crd.DeepCopy())
		if crd.Labels == nil {
			crd.Labels = map[string]string{}
		}
		crd.Labels[clusterctlLabel] = ""
		if err := e.Client.Patch(ctx, crd, patch); err != nil {
			return fmt.Errorf("labelling CRD %s for clusterctl: %w", crd.Name, err)
		}
		labelled++
	}
	if labelled == 0 {
		return errors.New("no Cluster API CRD found to label for clusterctl")
	}

	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: providerNamespace}}
	if err := e.Client.Create(ctx, ns); err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("creating namespace %s: %w", providerNamespace, err)
	}
	p := &unstructured.Unstructured{}
	p.SetAPIVersion(clusterctlGroup + "/v1alpha3")
	p.SetKind("Provider")
	p.SetNamespace(providerNamespace)
	p.SetName(coreProviderName)
	p.SetLabels(map[string]string{clusterctlLabel: "", "cluster.x-k8s.io/provider": coreProviderName})
	p.Object["providerName"] = coreProviderName
	p.Object["type"] = coreProviderType
	p.Object["version"] = coreProviderVersion
	if err := e.Client.Create(ctx, p); err != nil {
		return fmt.Errorf("recording the core provider in the clusterctl inventory: %w", err)
	}
	return nil
}

// moveResult is what the move program reports, with the time the whole
// process took.
type moveResult struct {
	Namespace string  `json:"namespace"`
	Seconds   float64 `json:"seconds"`
	Process   time.Duration
}

// moveNamespace moves namespace ns from the source to the target with the
// clusterctl client library, failing t if the move fails. The program runs
// with an empty home folder and no KUBECONFIG, and the test checks that it
// left that folder empty: no user file is read or written.
func moveNamespace(t *testing.T, ns string) moveResult {
	t.Helper()
	home := t.TempDir()
	args := []string{"-from", sourceKubeconfig, "-to", targetKubeconfig, "-namespace", ns}
	// INITLOCK_E2E_MOVE_V sets the verbosity of clusterctl's log, shown
	// when the move fails.
	if v := os.Getenv("INITLOCK_E2E_MOVE_V"); v != "" {
		args = append(args, "-v", v)
	}
	cmd := exec.CommandContext(t.Context(), moveProgram, args...)
	cmd.Env = append(withoutUserConfig(os.Environ()),
		"HOME="+home, "XDG_CONFIG_HOME="+filepath.Join(home, ".config"), "XDG_CACHE_HOME="+filepath.Join(home, ".cache"))
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	start := time.Now()
	err := cmd.Run()
	elapsed := time.Since(start)
	if err != nil {
		t.Fatalf("clusterctl move of namespace %s: %v\n%s", ns, err, stderr.String())
	}
	var res moveResult
	if err := json.Unmarshal(stdout.Bytes(), &res); err != nil {
		t.Fatalf("reading the result of clusterctl move of namespace %s: %v: %q", ns, err, stdout.String())
	}
	res.Process = elapsed
	if left := filesIn(t, home); len(left) > 0 {
		t.Errorf("clusterctl move wrote into the home folder: %v", left)
	}
	moves.add(t.Name(), res)
	t.Logf("clusterctl move of namespace %s: %.2fs in Move, %.2fs for the program", ns, res.Seconds, res.Process.Seconds())
	return res
}

// withoutUserConfig drops the variables that point clusterctl or client-go
// at user configuration.
func withoutUserConfig(environ []string) []string {
	var out []string
	for _, kv := range environ {
		name, _, _ := strings.Cut(kv, "=")
		switch {
		case name == "KUBECONFIG", name == "HOME", strings.HasPrefix(name, "XDG_"), strings.HasPrefix(name, "CLUSTERCTL_"):
			continue
		}
		out = append(out, kv)
	}
	return out
}

func filesIn(t *testing.T, dir string) []string {
	t.Helper()
	var out []string
	err := filepath.WalkDir(dir, func(path string, _ os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if path != dir {
			out = append(out, strings.TrimPrefix(path, dir+string(filepath.Separator)))
		}
		return nil
	})
	if err != nil {
		t.Fatalf("listing %s: %v", dir, err)
	}
	return out
}

// moveLog collects the moves the tests made, to print them at the end.
type moveLog struct {
	mu      sync.Mutex
	entries []moveEntry
}

type moveEntry struct {
	test string
	moveResult
}

func (l *moveLog) add(test string, r moveResult) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.entries = append(l.entries, moveEntry{test: test, moveResult: r})
}

func (l *moveLog) print(w io.Writer) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if len(l.entries) == 0 {
		return
	}
	entries := append([]moveEntry(nil), l.entries...)
	sort.Slice(entries, func(i, j int) bool { return entries[i].test < entries[j].test })
	fmt.Fprintln(w, "e2e: clusterctl move durations (Move call / whole program):")
	for _, e := range entries {
		fmt.Fprintf(w, "  %-70s %6.2fs / %6.2fs\n", e.test, e.Seconds, e.Process.Seconds())
	}
}
