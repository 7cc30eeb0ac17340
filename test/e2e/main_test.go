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
	"slices"
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
	// running are the control planes started and not yet stopped: an
	// interrupt stops them all before the binary exits.
	running struct {
		sync.Mutex
		envs []*kubeenv.Env
	}
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
	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, os.Interrupt, syscall.SIGTERM)
	go func() {
		<-sigs
		running.Lock()
		for _, e := range running.envs {
			_ = e.Stop()
		}
		_ = os.RemoveAll(dir)
		os.Exit(1)
	}()
	defer signal.Stop(sigs)

	// make test-e2e builds the move program before the test binary runs,
	// so that a cold build does not count against the test timeout.
	if moveProgram, err = capiProgram("move", "INITLOCK_E2E_MOVE", dir); err != nil {
		return fail(err)
	}

	// One after the other: starting both at once only makes them compete
	// for the same cores. Both have initlock's lock guard (clusterctl move
	// deletes the lock from the source: the guard lets it); the target
	// needs no controller manager.
	start := time.Now()
	defer func() {
		if err := errors.Join(stopPlane(source), stopPlane(target)); err != nil {
			fmt.Fprintf(os.Stderr, "e2e: %v\n", err)
			if code == 0 {
				code = 1
			}
		}
	}()
	if source, sourceKubeconfig, err = startPlane(context.Background(), kubeenv.Options{LockGuard: true}); err != nil {
		return fail(err)
	}
	if target, targetKubeconfig, err = startPlane(context.Background(), kubeenv.Options{NoControllerManager: true, LockGuard: true}); err != nil {
		return fail(err)
	}
	fmt.Printf("e2e: started two control planes in %.1fs\n", time.Since(start).Seconds())
	return m.Run()
}

func fail(err error) int {
	fmt.Fprintf(os.Stderr, "e2e: %v\n", err)
	return 1
}

// capiProgram returns the path of the program hack/capi/name: $env when it
// is set, else the program built into dir with the hack/capi module, whose
// go.mod pins Cluster API v1.14.2 and its own dependency versions.
func capiProgram(name, env, dir string) (string, error) {
	if p := os.Getenv(env); p != "" {
		return p, nil
	}
	root, err := kubeenv.RepoRoot()
	if err != nil {
		return "", err
	}
	start := time.Now()
	out := filepath.Join(dir, name)
	cmd := exec.Command("go", "build", "-o", out, "./"+name)
	cmd.Dir = filepath.Join(root, "hack", "capi")
	cmd.Env = append(os.Environ(), "GOWORK=off")
	if b, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("building hack/capi/%s: %w\n%s", name, err, b)
	}
	fmt.Printf("e2e: built hack/capi/%s in %.1fs\n", name, time.Since(start).Seconds())
	return out, nil
}

// startPlane starts a control plane with opts and, besides, the Cluster
// API v1.14.2 CRDs and clusterctl's inventory CRD from the same module,
// prepares it as clusterctl init would have (prepareManagementCluster),
// and returns it with a cluster-admin kubeconfig for the hack/capi
// programs. stopPlane stops it.
func startPlane(ctx context.Context, opts kubeenv.Options) (*kubeenv.Env, string, error) {
	capiDir, err := kubeenv.ModuleDir("hack/capi", "sigs.k8s.io/cluster-api")
	if err != nil {
		return nil, "", err
	}
	opts.CAPI = kubeenv.CAPIV1Beta2
	opts.CRDDirs = append(opts.CRDDirs, filepath.Join(capiDir, inventoryManifest))
	e, err := kubeenv.Start(opts)
	if err != nil {
		return nil, "", err
	}
	running.Lock()
	running.envs = append(running.envs, e)
	running.Unlock()
	if err := prepareManagementCluster(ctx, e); err != nil {
		return nil, "", errors.Join(err, stopPlane(e))
	}
	kubeconfig, err := e.WriteKubeconfig("clusterctl", []string{"system:masters"})
	if err != nil {
		return nil, "", errors.Join(err, stopPlane(e))
	}
	return e, kubeconfig, nil
}

// stopPlane stops a control plane of startPlane; nil is none.
func stopPlane(e *kubeenv.Env) error {
	if e == nil {
		return nil
	}
	running.Lock()
	running.envs = slices.DeleteFunc(running.envs, func(r *kubeenv.Env) bool { return r == e })
	running.Unlock()
	return e.Stop()
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

// programRun is one run of a hack/capi program: when the process started
// and ended, what it wrote on stderr (its log) and its home folder.
type programRun struct {
	Start, End time.Time `json:"-"`
	Log        string    `json:"-"`
	home       string
}

// runProgram runs a hack/capi program with args, with an empty home folder
// and no user configuration (withoutUserConfig), fails t (saying it ran
// what) unless it succeeds, and reads the JSON line it prints into res.
func runProgram(t *testing.T, what, program string, args []string, res any) programRun {
	t.Helper()
	r := programRun{home: t.TempDir()}
	cmd := exec.CommandContext(t.Context(), program, args...)
	cmd.Env = append(withoutUserConfig(os.Environ()),
		"HOME="+r.home, "XDG_CONFIG_HOME="+filepath.Join(r.home, ".config"), "XDG_CACHE_HOME="+filepath.Join(r.home, ".cache"))
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	r.Start = time.Now()
	err := cmd.Run()
	r.End, r.Log = time.Now(), stderr.String()
	if err != nil {
		t.Fatalf("%s: %v\n%s", what, err, r.Log)
	}
	if err := json.Unmarshal(stdout.Bytes(), res); err != nil {
		t.Fatalf("reading the result of %s: %v: %q", what, err, stdout.String())
	}
	return r
}

// moveNamespace moves namespace ns from the source to the target with the
// clusterctl client library, failing t if the move fails. The program runs
// with an empty home folder and no KUBECONFIG, and the test checks that it
// left that folder empty: no user file is read or written.
func moveNamespace(t *testing.T, ns string) {
	t.Helper()
	args := []string{"-from", sourceKubeconfig, "-to", targetKubeconfig, "-namespace", ns}
	// INITLOCK_E2E_MOVE_V sets the verbosity of clusterctl's log, shown
	// when the move fails.
	if v := os.Getenv("INITLOCK_E2E_MOVE_V"); v != "" {
		args = append(args, "-v", v)
	}
	var res struct {
		Seconds float64 `json:"seconds"`
	}
	r := runProgram(t, "clusterctl move of namespace "+ns, moveProgram, args, &res)
	if left := filesIn(t, r.home); len(left) > 0 {
		t.Errorf("clusterctl move wrote into the home folder: %v", left)
	}
	t.Logf("clusterctl move of namespace %s: %.2fs in Move, %.2fs for the program", ns, res.Seconds, r.End.Sub(r.Start).Seconds())
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
