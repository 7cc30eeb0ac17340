package cli_test

import (
	"context"
	"path/filepath"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/initlock/initlock/internal/cli"
	"github.com/initlock/initlock/internal/kubeenv"
)

// managerDeployment creates a Deployment as config/ installs
// initlock-manager, with args, and deletes it when the test ends (before
// its namespace, so that later tests do not find it).
func managerDeployment(t *testing.T, ns string, args ...string) {
	t.Helper()
	labels := map[string]string{"app.kubernetes.io/name": "initlock-manager"}
	d := &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "initlock-controller-manager", Labels: labels},
		Spec: appsv1.DeploymentSpec{
			Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec: corev1.PodSpec{Containers: []corev1.Container{{
					Name: "manager", Image: "initlock-manager:dev", Command: []string{"/initlock-manager"}, Args: args,
				}}},
			},
		},
	}
	if err := env.Client.Create(t.Context(), d); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx := context.WithoutCancel(t.Context())
		if err := env.Client.Delete(ctx, d); err != nil && !apierrors.IsNotFound(err) {
			t.Errorf("deleting %s: %v", d.Name, err)
		}
		kubeenv.Eventually(t, 10*time.Second, func() error {
			err := env.Client.Get(ctx, client.ObjectKeyFromObject(d), &appsv1.Deployment{})
			if apierrors.IsNotFound(err) {
				return nil
			}
			return err
		})
	})
}

// repair decides with the policy of the installed manager: one that keeps
// locks after init (as for MicroK8s) makes repair keep them too, and says
// so; a flag given on the command line wins over it.
func TestRepairUsesTheManagersPolicy(t *testing.T) {
	ns := env.Namespace(t)
	cl := newCluster(t, ns, "c1", true)
	newMachine(t, ns, "c1", "m1", nil)
	newLock(t, ns, "c1", "m1", cl)
	managerDeployment(t, ns, "--leader-elect", "--release-after-init=false", "--orphan-grace", "1h")

	var c kubeenv.Counter
	r := invocation{wrap: counting(&c)}.run(t, "repair", "-n", ns, "--yes")
	r.expectCode(t, cli.ExitOK)
	want := "Using the policy of Deployment " + ns + "/initlock-controller-manager: --release-after-init=false --orphan-grace=1h0m0s\n"
	if r.err != want || !strings.Contains(r.out, "Nothing to change.") || c.Writes() != 0 {
		t.Fatalf("repair with the manager's policy made %d writes\nstderr: %q\nwant:   %q\nstdout:\n%s", c.Writes(), r.err, want, r.out)
	}

	c.Reset()
	r = invocation{wrap: counting(&c)}.run(t, "repair", "-n", ns, "--release-after-init=true", "--yes")
	r.expectCode(t, cli.ExitOK)
	want = "Using the policy of Deployment " + ns + "/initlock-controller-manager, with the flags given: --release-after-init=true --orphan-grace=1h0m0s\n"
	if r.err != want || !strings.Contains(r.out, "released") || c.Writes() != 2 {
		t.Fatalf("repair --release-after-init=true made %d writes\nstderr: %q\nwant:   %q\nstdout:\n%s", c.Writes(), r.err, want, r.out)
	}
}

// Without a manager Deployment, repair says it uses the defaults.
func TestRepairWithoutManagerSaysSo(t *testing.T) {
	ns := env.Namespace(t)
	r := run(t, "repair", "-n", ns, "--yes")
	r.expectCode(t, cli.ExitOK)
	if want := "Using the policy of defaults and flags: no initlock-manager Deployment found: --release-after-init=true --orphan-grace=10m0s\n"; r.err != want {
		t.Fatalf("stderr = %q, want %q", r.err, want)
	}
}

// release and list of a Cluster that has neither a Cluster object nor a
// lock fail with NotFound, as kubectl get does.
func TestMissingClusterIsNotFound(t *testing.T) {
	ns := env.Namespace(t)
	newCluster(t, ns, "free", false)
	for _, args := range [][]string{{"release", "nope", "-n", ns}, {"list", "nope", "-n", ns}} {
		r := run(t, args...)
		r.expectCode(t, cli.ExitError)
		if want := `Error from server (NotFound): clusters.cluster.x-k8s.io "nope" not found` + "\n"; r.err != want || r.out != "" {
			t.Errorf("%v: stderr %q, stdout %q; want stderr %q", args, r.err, r.out, want)
		}
	}
	// An existing Cluster without a lock is listed, as free.
	r := run(t, "list", "free", "-n", ns)
	r.expectCode(t, cli.ExitOK)
	if !strings.Contains(r.out, "free") || strings.Count(r.out, "\n") != 2 {
		t.Errorf("list free:\n%s", r.out)
	}
}

// A kubeconfig that does not exist gets a hint.
func TestMissingKubeconfigHint(t *testing.T) {
	r := invocation{kubeconfig: filepath.Join(t.TempDir(), "nope")}.run(t, "list")
	r.expectCode(t, cli.ExitError)
	if !strings.Contains(r.err, "pass --kubeconfig, set KUBECONFIG, or create ~/.kube/config") {
		t.Errorf("stderr: %q", r.err)
	}
}
