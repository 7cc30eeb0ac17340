package clisuite

import (
	"context"
	"reflect"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/initlock/initlock/internal/cli"
	"github.com/initlock/initlock/internal/kubeenv"
)

// managerDeployment creates a Deployment as config/ installs
// initlock-manager, with args, and deletes it when the test ends (before
// its namespace, so that later tests do not find it).
func (b *Backend) managerDeployment(t *testing.T, ns string, args ...string) {
	t.Helper()
	d := readConfig[appsv1.Deployment](t, "manager/manager.yaml")[0]
	d.Namespace, d.Name = ns, "initlock-controller-manager"
	d.Spec.Template.Spec.Containers[0].Args = args
	b.createDeployment(t, d)
}

// readConfig reads the objects of kind T from config/<file>.
func readConfig[T any, P interface {
	*T
	client.Object
}](t *testing.T, file string) []P {
	t.Helper()
	objs, err := kubeenv.ReadObjects(repoPath(t, "config", file))
	if err != nil {
		t.Fatal(err)
	}
	var out []P
	for _, u := range objs {
		// The kind of an API type is the name of its Go type.
		if u.GetKind() != reflect.TypeFor[T]().Name() {
			continue
		}
		var obj P = new(T)
		if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, obj); err != nil {
			t.Fatal(err)
		}
		out = append(out, obj)
	}
	if len(out) == 0 {
		t.Fatalf("config/%s holds no %T", file, new(T))
	}
	return out
}

// createDeployment creates d and deletes it when t ends, waiting until it
// is gone: list and repair find the manager's Deployment by its label in
// every namespace, and later tests must not.
func (b *Backend) createDeployment(t *testing.T, d *appsv1.Deployment) {
	t.Helper()
	if err := b.Client.Create(t.Context(), d); err != nil {
		t.Fatalf("creating Deployment %s: %v", d.Name, err)
	}
	t.Cleanup(func() {
		ctx := context.WithoutCancel(t.Context())
		if err := b.Client.Delete(ctx, d); err != nil && !apierrors.IsNotFound(err) {
			t.Errorf("deleting Deployment %s: %v", d.Name, err)
		}
		kubeenv.Eventually(t, 10*time.Second, func() error {
			err := b.Client.Get(ctx, client.ObjectKeyFromObject(d), &appsv1.Deployment{})
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
func repairUsesTheManagersPolicy(t *testing.T, b *Backend) {
	ns := b.Namespace(t)
	b.held(t, ns, "c1", true)
	b.managerDeployment(t, ns, "--leader-elect", "--release-after-init=false", "--orphan-grace", "1h")

	var c kubeenv.Counter
	r := b.run(t, invocation{counter: &c}, "repair", "-n", ns, "--yes").ExpectCode(t, cli.ExitOK)
	want := "Using the policy of Deployment " + ns + "/initlock-controller-manager: --release-after-init=false --orphan-grace=1h0m0s\n"
	if r.Err != want || !strings.Contains(r.Out, "Nothing to change.") || c.Writes() != 0 {
		t.Fatalf("repair with the manager's policy made %d writes\nstderr: %q\nwant:   %q\nstdout:\n%s", c.Writes(), r.Err, want, r.Out)
	}

	c.Reset()
	r = b.run(t, invocation{counter: &c}, "repair", "-n", ns, "--release-after-init=true", "--yes").ExpectCode(t, cli.ExitOK)
	want = "Using the policy of Deployment " + ns + "/initlock-controller-manager, with the flags given: --release-after-init=true --orphan-grace=1h0m0s\n"
	if r.Err != want || !strings.Contains(r.Out, "released") || c.Writes() != 2 {
		t.Fatalf("repair --release-after-init=true made %d writes\nstderr: %q\nwant:   %q\nstdout:\n%s", c.Writes(), r.Err, want, r.Out)
	}
}

// Without a manager Deployment, repair says it uses the defaults.
func repairWithoutManagerSaysSo(t *testing.T, b *Backend) {
	ns := b.Namespace(t)
	r := b.run(t, invocation{}, "repair", "-n", ns, "--yes").ExpectCode(t, cli.ExitOK)
	if want := "Using the policy of defaults and flags: no initlock-manager Deployment found: --release-after-init=true --orphan-grace=10m0s\n"; r.Err != want {
		t.Fatalf("stderr = %q, want %q", r.Err, want)
	}
}

// release and list of a Cluster that has neither a Cluster object nor a
// lock fail with NotFound, as kubectl get does.
func missingClusterIsNotFound(t *testing.T, b *Backend) {
	ns := b.Namespace(t)
	b.newCluster(t, ns, "free", false)
	for _, args := range [][]string{{"release", "nope", "-n", ns}, {"list", "nope", "-n", ns}} {
		r := b.run(t, invocation{}, args...).ExpectCode(t, cli.ExitError)
		if want := `Error from server (NotFound): clusters.cluster.x-k8s.io "nope" not found` + "\n"; r.Err != want || r.Out != "" {
			t.Errorf("%v: stderr %q, stdout %q; want stderr %q", args, r.Err, r.Out, want)
		}
	}
	// An existing Cluster without a lock is listed, as free.
	r := b.run(t, invocation{}, "list", "free", "-n", ns).ExpectCode(t, cli.ExitOK)
	if !strings.Contains(r.Out, "free") || strings.Count(r.Out, "\n") != 2 {
		t.Errorf("list free:\n%s", r.Out)
	}
}
