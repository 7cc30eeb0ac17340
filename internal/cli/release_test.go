package cli_test

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/initlock/initlock/internal/cli"
	"github.com/initlock/initlock/internal/kubeenv"
	"github.com/initlock/initlock/pkg/initlock"
	"github.com/initlock/initlock/pkg/initlock/engine"
)

// grantOf reads the grant register of cluster live: the machine it names,
// "" when it is empty.
func grantOf(t *testing.T, cluster *unstructured.Unstructured) string {
	t.Helper()
	if g := engine.GrantFrom(getCluster(t, cluster).GetAnnotations()); g != nil {
		return g.MachineName
	}
	return ""
}

// getCluster reads cluster again, live.
func getCluster(t *testing.T, cluster *unstructured.Unstructured) *unstructured.Unstructured {
	t.Helper()
	got := &unstructured.Unstructured{}
	got.SetGroupVersionKind(cluster.GroupVersionKind())
	if err := env.Client.Get(t.Context(), client.ObjectKeyFromObject(cluster), got); err != nil {
		t.Fatal(err)
	}
	return got
}

// lockedCluster makes, in a namespace of its own, Cluster c1 whose Machine
// m1 acquired the init lock with the library.
func lockedCluster(t *testing.T) (string, *unstructured.Unstructured) {
	t.Helper()
	ns := env.Namespace(t)
	cluster := newCluster(t, ns, "c1", false)
	m1 := newMachine(t, ns, "c1", "m1", nil)
	if res, err := initlock.New(env.Client).Lock(t.Context(), cluster, m1); err != nil || !res.Acquired {
		t.Fatalf("Lock(m1): %+v, %v", res, err)
	}
	return ns, cluster
}

func TestReleaseRefusesWhileInitMayRunThenForce(t *testing.T) {
	ns, cluster := lockedCluster(t)
	if grantOf(t, cluster) != "m1" {
		t.Fatal("no grant recorded for m1")
	}

	var c kubeenv.Counter
	r := invocation{wrap: counting(&c)}.run(t, "release", "c1", "-n", ns)
	r.expectCode(t, cli.ExitError)
	for _, want := range []string{
		`namespace "` + ns + `": configmap "c1-lock": refusing to release: machine "m1" holds it and the control plane of cluster "c1" is not initialised`,
		"--force",
	} {
		if !strings.Contains(r.err, want) {
			t.Errorf("stderr lacks %q:\n%s", want, r.err)
		}
	}
	if c.Writes() != 0 || kubeenv.MustGetLock(t, env.Client, ns, "c1") == nil {
		t.Fatalf("refused release wrote %d times", c.Writes())
	}

	c.Reset()
	r = invocation{wrap: counting(&c)}.run(t, "release", "c1", "-n", ns, "--force", "--yes")
	r.expectCode(t, cli.ExitOK)
	if !strings.Contains(r.err, "warning: releasing lock") || !strings.Contains(r.out, `released init lock "c1-lock" of cluster "c1" (holder "m1")`) {
		t.Errorf("stdout:\n%s\nstderr:\n%s", r.out, r.err)
	}
	if kubeenv.MustGetLock(t, env.Client, ns, "c1") != nil {
		t.Fatal("lock still exists")
	}
	if g := grantOf(t, cluster); g != "" {
		t.Fatalf("grant not withdrawn: %s", g)
	}
	if got := c.Writes(); got != 4 {
		t.Errorf("writes = %d, want 4 (retire the grant, withdraw it, mark the lock for release, delete it)", got)
	}
	// Nothing left to release.
	r = run(t, "release", "c1", "-n", ns, "--yes")
	r.expectCode(t, cli.ExitOK)
	if !strings.Contains(r.out, "nothing to release") {
		t.Errorf("stdout: %s", r.out)
	}
}

func TestReleaseAfterInitNeedsNoForce(t *testing.T) {
	ns := env.Namespace(t)
	cl := newCluster(t, ns, "c1", true)
	newMachine(t, ns, "c1", "m1", nil)
	newLock(t, ns, "c1", "m1", cl)
	r := run(t, "release", "c1", "-n", ns, "--yes")
	r.expectCode(t, cli.ExitOK)
	if kubeenv.MustGetLock(t, env.Client, ns, "c1") != nil {
		t.Fatal("lock still exists")
	}
}

// A lock lost while its grant stands is recreated for the holder by the
// next Lock; release empties the grant register, with --force while the
// holder exists and the control plane is not initialised.
func TestReleaseLostLockEmptiesTheGrantRegister(t *testing.T) {
	ctx := t.Context()
	ns, cluster := lockedCluster(t)
	if err := kubeenv.ReleaseLock(ctx, env.Client, kubeenv.MustGetLock(t, env.Client, ns, "c1")); err != nil {
		t.Fatal(err)
	}

	var c kubeenv.Counter
	r := invocation{wrap: counting(&c)}.run(t, "release", "c1", "-n", ns, "--yes")
	r.expectCode(t, cli.ExitError)
	if want := `cluster "c1": refusing to release: its init lock is missing, but its grant register (annotation ` + engine.GrantAnnotation + `) names m1`; !strings.Contains(r.err, want) {
		t.Errorf("stderr lacks %q:\n%s", want, r.err)
	}
	if c.Writes() != 0 || grantOf(t, cluster) != "m1" {
		t.Fatalf("refused release wrote %d times; register names %q", c.Writes(), grantOf(t, cluster))
	}

	c.Reset()
	r = invocation{wrap: counting(&c)}.run(t, "release", "c1", "-n", ns, "--force", "--yes")
	r.expectCode(t, cli.ExitOK)
	if !strings.Contains(r.out, `cluster "c1" has no init lock; emptied its grant register, which named m1`) {
		t.Errorf("stdout: %s", r.out)
	}
	if g := grantOf(t, cluster); g != "" {
		t.Fatalf("grant register still names %s", g)
	}
	if got := c.Writes(); got != 2 {
		t.Errorf("writes = %d, want 2 (retire the grant, then withdraw it)", got)
	}
	m2 := newMachine(t, ns, "c1", "m2", nil)
	if res, err := initlock.New(env.Client).Lock(ctx, getCluster(t, cluster), m2); err != nil || !res.Acquired {
		t.Fatalf("Lock(m2) after the release: %+v, %v; want acquired", res, err)
	}
}

func TestReleaseOrphanAndStaleHolder(t *testing.T) {
	t.Run("orphan whose holder exists is refused", func(t *testing.T) {
		ns := env.Namespace(t)
		newMachine(t, ns, "c1", "m1", nil)
		newLock(t, ns, "c1", "m1", nil)
		r := run(t, "release", "c1", "-n", ns, "--yes")
		r.expectCode(t, cli.ExitError)
		if !strings.Contains(r.err, `cluster "c1" does not exist (a restore may still be bringing it back)`) {
			t.Errorf("stderr: %s", r.err)
		}
	})
	t.Run("holder gone", func(t *testing.T) {
		ns := env.Namespace(t)
		cl := newCluster(t, ns, "c1", false)
		newLock(t, ns, "c1", "m-gone", cl)
		run(t, "release", "c1", "-n", ns, "--yes").expectCode(t, cli.ExitOK)
		if kubeenv.MustGetLock(t, env.Client, ns, "c1") != nil {
			t.Fatal("lock still exists")
		}
	})
}

func TestReleaseCorrupt(t *testing.T) {
	ns := env.Namespace(t)
	cl := newCluster(t, ns, "c1", false)
	newConfigMap(t, ns, "c1-lock", map[string]string{engine.ClusterNameLabel: "c1"}, map[string]string{engine.DataKey: "{"}, cl)
	r := run(t, "release", "c1", "-n", ns, "--yes")
	r.expectCode(t, cli.ExitError)
	if !strings.Contains(r.err, "so its holder is unknown") {
		t.Errorf("stderr: %s", r.err)
	}
	r = run(t, "release", "c1", "-n", ns, "--force", "--yes")
	r.expectCode(t, cli.ExitOK)
	if kubeenv.MustGetLock(t, env.Client, ns, "c1") != nil {
		t.Fatal("corrupt lock still exists")
	}
}

func TestReleaseRefusesForeignConfigMapEvenWithForce(t *testing.T) {
	ns := env.Namespace(t)
	newCluster(t, ns, "c1", true)
	newConfigMap(t, ns, "c1-lock", map[string]string{engine.ClusterNameLabel: "c1"}, map[string]string{"other": "data"}, nil)
	want := `error: namespace "` + ns + `": configmap "c1-lock" is not an init lock (no lock-information key); refusing to touch it`
	for _, args := range [][]string{{"release", "c1", "-n", ns}, {"release", "c1", "-n", ns, "--force"}} {
		var c kubeenv.Counter
		r := invocation{wrap: counting(&c)}.run(t, args...)
		r.expectCode(t, cli.ExitError)
		if !strings.HasPrefix(r.err, want) {
			t.Errorf("stderr:\n%s\nwant prefix:\n%s", r.err, want)
		}
		if c.Writes() != 0 {
			t.Errorf("%v wrote %d times", args, c.Writes())
		}
	}
	if kubeenv.MustGetLock(t, env.Client, ns, "c1") == nil {
		t.Fatal("foreign configmap was deleted")
	}
}

func TestReleaseArguments(t *testing.T) {
	r := run(t, "release")
	r.expectCode(t, cli.ExitError)
	if !strings.Contains(r.err, "accepts 1 arg(s), received 0") {
		t.Errorf("stderr: %s", r.err)
	}
	r = run(t, "release", "Not_A_Name", "-n", "default")
	r.expectCode(t, cli.ExitError)
	if !strings.Contains(r.err, `cluster "Not_A_Name"`) {
		t.Errorf("stderr: %s", r.err)
	}
}

// TestReleaseGuardedLockWithoutTheManager: with initlock-manager down, the
// lock of a deleted Cluster stays while its holder exists (the lock guard
// refuses the garbage collector's delete); the namespace is not held up by
// it. release refuses without --force, since the holder exists; with it,
// it marks the lock for release and deletes it.
func TestReleaseGuardedLockWithoutTheManager(t *testing.T) {
	ns, cluster := lockedCluster(t)
	if err := env.Client.Delete(t.Context(), cluster); err != nil {
		t.Fatal(err)
	}
	kubeenv.Consistently(t, 3*time.Second, func() error {
		switch got := kubeenv.MustGetLock(t, env.Client, ns, "c1"); {
		case got == nil:
			return fmt.Errorf("the held lock went while its holder exists")
		case got.DeletionTimestamp != nil:
			return fmt.Errorf("the held lock is being deleted")
		}
		return nil
	})

	r := run(t, "list", "-n", ns)
	r.expectCode(t, cli.ExitOK)
	if !strings.Contains(r.out, "guarded") {
		t.Errorf("list does not show the lock as guarded:\n%s", r.out)
	}
	run(t, "release", "c1", "-n", ns, "--yes").expectCode(t, cli.ExitError)
	var c kubeenv.Counter
	r = invocation{wrap: counting(&c)}.run(t, "release", "c1", "-n", ns, "--force", "--yes")
	r.expectCode(t, cli.ExitOK)
	if got := kubeenv.MustGetLock(t, env.Client, ns, "c1"); got != nil {
		t.Fatalf("lock still exists after release --force: annotations %v", got.Annotations)
	}
	// The Cluster is gone, so the register is not read or written: one
	// patch marks the lock for release, one delete removes it.
	if p, d := c.Count("patch"), c.Count("delete"); p != 1 || d != 1 {
		t.Errorf("release --force made %d patches and %d deletes, want 1 (the release mark) and 1", p, d)
	}
}
