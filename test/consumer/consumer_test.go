package consumer_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"github.com/initlock/initlock/internal/kubeenv"
)

var env *kubeenv.Env

func TestMain(m *testing.M) { kubeenv.Main(m, kubeenv.Options{}, &env) }

// target is a set of versions a provider builds with.
type target struct {
	name string
	// controllerRuntime and kubernetes are the versions the provider
	// requires, as Cluster API's go.mod does.
	controllerRuntime, kubernetes string
	// capiAPI, when set, is the version of sigs.k8s.io/cluster-api/api the
	// provider requires, and the typed program is built and run.
	capiAPI string
}

// The controller-runtime and Kubernetes versions of Cluster API's go.mod:
// v1.12.0 (controller-runtime v0.22.4, Kubernetes v0.34.2) and v1.14.2
// (v0.24.1, v0.36.3). Cluster API v1.12 keeps its types in its main
// module, whose graph has cobra (clusterctl): the typed program is built
// with v1.14's module of types only.
var targets = []target{
	{name: "capi-v1.12", controllerRuntime: "v0.22.4", kubernetes: "v0.34.2"},
	{name: "capi-v1.14", controllerRuntime: "v0.24.1", kubernetes: "v0.36.3", capiAPI: "v1.14.2"},
}

// libraryModule is the library's module path.
const libraryModule = "github.com/initlock/initlock/pkg/initlock"

// forbidden are modules of the main module's graph that the library must
// not bring to a provider. controller-runtime's own go.mod requires cobra
// (for its tools): it may be in the graph of every controller-runtime
// provider, but the library must add it to none, and no program links it.
var forbidden = []string{"github.com/vmware-tanzu/velero", "gonum.org/", "github.com/spf13/cobra", "k8s.io/cli-runtime"}

func TestConsumerModule(t *testing.T) {
	for _, tg := range targets {
		t.Run(tg.name, func(t *testing.T) {
			dir := newConsumer(t, tg)
			if got := goCmd(t, dir, "list", "-m", "-f", "{{.Version}}", "sigs.k8s.io/controller-runtime"); got != tg.controllerRuntime {
				t.Errorf("the provider builds with controller-runtime %s, want %s: the library requires a newer one", got, tg.controllerRuntime)
			}
			if got := goCmd(t, dir, "list", "-m", "-f", "{{.Version}}", "k8s.io/client-go"); got != tg.kubernetes {
				t.Errorf("the provider builds with client-go %s, want %s: the library requires a newer one", got, tg.kubernetes)
			}
			graph := modulePaths(goCmd(t, dir, "mod", "graph"))
			base := modulePaths(goCmd(t, newBaseline(t, tg), "mod", "graph"))
			var added []string
			for p := range graph {
				if !base[p] && p != libraryModule {
					added = append(added, p)
				}
			}
			sort.Strings(added)
			if len(added) > 0 {
				t.Errorf("the library adds modules to the graph of a provider on controller-runtime %s:\n%s", tg.controllerRuntime, strings.Join(added, "\n"))
			}
			for _, f := range forbidden {
				for p := range graph {
					if strings.HasPrefix(p, f) && !base[p] {
						t.Errorf("the provider's module graph holds %s, which the library brings", p)
					}
				}
			}
			pkgs := []string{"./untyped"}
			if tg.capiAPI != "" {
				pkgs = append(pkgs, "./typed")
			}
			imports := goCmd(t, dir, append([]string{"list", "-f", `{{join .Imports "\n"}}`}, pkgs...)...)
			for _, imp := range strings.Fields(imports) {
				if strings.HasPrefix(imp, libraryModule) && imp != libraryModule && imp != libraryModule+"/locking" {
					t.Errorf("a provider's program imports %s: a provider needs the library's root package and locking alone", imp)
				}
			}
			deps := goCmd(t, dir, append([]string{"list", "-deps", "-f", "{{with .Module}}{{.Path}}{{end}}"}, pkgs...)...)
			for _, f := range forbidden {
				if strings.Contains("\n"+deps, "\n"+f) {
					t.Errorf("the provider's programs link packages of %s", f)
				}
			}
			t.Logf("%s: controller-runtime %s, client-go %s: %d modules in the graph, the library adds none but itself; of %v, the graph holds only what controller-runtime itself requires (%s), and no program links any",
				tg.name, tg.controllerRuntime, tg.kubernetes, len(graph), forbidden, strings.Join(present(graph, forbidden), ", "))
			goCmd(t, dir, "build", "-o", os.DevNull, "./untyped")
			if tg.capiAPI == "" {
				return
			}
			bin := filepath.Join(t.TempDir(), "typed")
			goCmd(t, dir, "build", "-o", bin, "./typed")
			runTyped(t, bin)
		})
	}
}

// runTyped runs the typed program against the API server and checks what
// it printed.
func runTyped(t *testing.T, bin string) {
	kubeconfig, err := env.WriteKubeconfig("consumer", []string{"system:masters"})
	if err != nil {
		t.Fatal(err)
	}
	ns := env.Namespace(t)
	out, err := exec.CommandContext(t.Context(), bin, kubeconfig, ns).CombinedOutput()
	if err != nil {
		t.Fatalf("typed program: %v\n%s", err, out)
	}
	want := `lock: true
object has the grant: true new resourceVersion: true
update after lock: <nil>
second machine refused: true
unlock: true
object has the grant: false
update after unlock: <nil>
`
	if got := filterLogs(string(out)); got != want {
		t.Errorf("typed program printed:\n%s\nwant:\n%s", got, want)
	}
}

// filterLogs drops the log lines of controller-runtime's default logger.
func filterLogs(s string) string {
	var keep []string
	for _, l := range strings.SplitAfter(s, "\n") {
		if l != "" && !strings.HasPrefix(l, "[controller-runtime]") {
			keep = append(keep, l)
		}
	}
	return strings.Join(keep, "")
}

// modulePaths returns the module paths of the nodes of a go mod graph.
func modulePaths(graph string) map[string]bool {
	out := map[string]bool{}
	for _, line := range strings.Split(graph, "\n") {
		for _, node := range strings.Fields(line) {
			path, _, _ := strings.Cut(node, "@")
			out[path] = true
		}
	}
	return out
}

// present returns the modules of paths that begin with one of prefixes.
func present(paths map[string]bool, prefixes []string) []string {
	var out []string
	for p := range paths {
		for _, f := range prefixes {
			if strings.HasPrefix(p, f) {
				out = append(out, p)
			}
		}
	}
	sort.Strings(out)
	return out
}

// newBaseline writes the same provider without the library: it imports
// controller-runtime (and Cluster API's types when tg has them) only.
func newBaseline(t *testing.T, tg target) string {
	t.Helper()
	dir := t.TempDir()
	src := "package main\n\nimport (\n\t_ \"sigs.k8s.io/controller-runtime\"\n\t_ \"sigs.k8s.io/controller-runtime/pkg/client\"\n"
	if tg.capiAPI != "" {
		src += "\t_ \"sigs.k8s.io/cluster-api/api/core/v1beta2\"\n"
	}
	src += ")\n\nfunc main() {}\n"
	if err := os.WriteFile(filepath.Join(dir, "main.go"), []byte(src), 0o644); err != nil {
		t.Fatal(err)
	}
	writeGoMod(t, dir, tg, "")
	goCmd(t, dir, "mod", "tidy")
	return dir
}

// newConsumer writes the provider module for tg into a temporary folder,
// outside the main module, and resolves its requirements.
func newConsumer(t *testing.T, tg target) string {
	t.Helper()
	root, err := kubeenv.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	pkgs := []string{"untyped"}
	if tg.capiAPI != "" {
		pkgs = append(pkgs, "typed")
	}
	for _, p := range pkgs {
		if err := os.CopyFS(filepath.Join(dir, p), os.DirFS(filepath.Join("testdata", "provider", p))); err != nil {
			t.Fatal(err)
		}
	}
	writeGoMod(t, dir, tg, filepath.Join(root, "pkg", "initlock"))
	goCmd(t, dir, "mod", "tidy")
	return dir
}

// writeGoMod writes the go.mod of a provider module for tg into dir; with
// lib, it requires the library, replaced by that folder.
func writeGoMod(t *testing.T, dir string, tg target, lib string) {
	t.Helper()
	var mod bytes.Buffer
	fmt.Fprintf(&mod, "module example.test/provider\n\ngo 1.25.0\n\nrequire (\n")
	if lib != "" {
		fmt.Fprintf(&mod, "\t%s v0.0.0\n", libraryModule)
	}
	for _, m := range []string{"k8s.io/api", "k8s.io/apimachinery", "k8s.io/client-go"} {
		fmt.Fprintf(&mod, "\t%s %s\n", m, tg.kubernetes)
	}
	fmt.Fprintf(&mod, "\tsigs.k8s.io/controller-runtime %s\n", tg.controllerRuntime)
	if tg.capiAPI != "" {
		fmt.Fprintf(&mod, "\tsigs.k8s.io/cluster-api/api %s\n", tg.capiAPI)
	}
	fmt.Fprintf(&mod, ")\n")
	if lib != "" {
		fmt.Fprintf(&mod, "\nreplace %s => %s\n", libraryModule, lib)
	}
	if err := os.WriteFile(filepath.Join(dir, "go.mod"), mod.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
}

// goCmd runs the go command in dir with -mod=mod and -trimpath (its builds
// are cached whatever the temporary folder) and returns its output.
// It skips the test when the module proxy cannot be reached.
func goCmd(t *testing.T, dir string, args ...string) string {
	t.Helper()
	cmd := exec.CommandContext(t.Context(), "go", args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "GOFLAGS=-mod=mod -trimpath", "GOWORK=off", "GOTOOLCHAIN=local")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		if unreachable(stderr.String()) {
			t.Skipf("the module proxy cannot be reached, so the provider module cannot be resolved: go %s: %s", strings.Join(args, " "), stderr.String())
		}
		if errors.Is(t.Context().Err(), context.DeadlineExceeded) {
			t.Fatalf("go %s: timed out", strings.Join(args, " "))
		}
		t.Fatalf("go %s in %s: %v\n%s", strings.Join(args, " "), dir, err, stderr.String())
	}
	return strings.TrimSpace(string(out))
}

// unreachable tells whether the go command failed for want of the network.
func unreachable(stderr string) bool {
	for _, s := range []string{"dial tcp", "no such host", "connection refused", "network is unreachable", "proxyconnect", "i/o timeout", "TLS handshake timeout"} {
		if strings.Contains(stderr, s) {
			return true
		}
	}
	return false
}
