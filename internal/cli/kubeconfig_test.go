package cli_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"k8s.io/client-go/tools/clientcmd"

	"github.com/initlock/initlock/internal/cli"
	clisuite "github.com/initlock/initlock/test/cli"
)

// Without any kubeconfig, the plugin says so and how to give one, and
// never connects to http://localhost:8080.
func TestNoKubeconfig(t *testing.T) {
	t.Setenv("KUBERNETES_SERVICE_HOST", "")
	t.Setenv("KUBERNETES_SERVICE_PORT", "")
	// KUBECONFIG naming a missing file hides ~/.kube/config, as in kubectl.
	missing := filepath.Join(t.TempDir(), "nope")
	t.Setenv("KUBECONFIG", missing)
	for _, args := range [][]string{{"list", "-A"}, {"repair", "-A", "--yes"}, {"release", "c1"}} {
		r := clisuite.Execute(t, cli.Options{}, args...).ExpectCode(t, cli.ExitError)
		want := `error: no kubeconfig found (KUBECONFIG="` + missing + `" names no file that holds a cluster), and this is not a Pod with a service account: ` +
			"kubectl-initlock reads the kubeconfig as kubectl does: pass --kubeconfig, set KUBECONFIG, or create ~/.kube/config"
		if !strings.HasPrefix(r.Err, want) || strings.Contains(r.Err, "8080") {
			t.Errorf("%v: stderr %q\nwant prefix %q", args, r.Err, want)
		}
	}
	if _, err := os.Stat(clientcmd.RecommendedHomeFile); err == nil {
		t.Logf("%s exists: the case without KUBECONFIG is not checked here", clientcmd.RecommendedHomeFile)
		return
	}
	t.Setenv("KUBECONFIG", "")
	r := clisuite.Execute(t, cli.Options{}, "list").ExpectCode(t, cli.ExitError)
	if want := "error: no kubeconfig found (KUBECONFIG is not set, and " + clientcmd.RecommendedHomeFile + " does not exist or holds no cluster)"; !strings.HasPrefix(r.Err, want) {
		t.Errorf("stderr %q\nwant prefix %q", r.Err, want)
	}
}

// A kubeconfig that does not exist gets a hint, and makes repair exit with
// ExitError.
func TestMissingKubeconfigHint(t *testing.T) {
	for _, args := range [][]string{{"list"}, {"repair", "-n", "default"}} {
		clisuite.Execute(t, cli.Options{}, append(args, "--kubeconfig", filepath.Join(t.TempDir(), "nope"))...).ExpectCode(t, cli.ExitError).
			ErrHas(t, "pass --kubeconfig, set KUBECONFIG, or create ~/.kube/config")
	}
}

func TestVersion(t *testing.T) {
	if r := clisuite.Execute(t, cli.Options{}, "version").ExpectCode(t, cli.ExitOK); !strings.HasPrefix(r.Out, "kubectl-initlock v0.0.0-test (go") {
		t.Errorf("version output: %q", r.Out)
	}
	if v := cli.DefaultVersion(); v == "" {
		t.Error("DefaultVersion is empty")
	}
}
