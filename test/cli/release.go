package clisuite

import (
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/initlock/initlock/internal/cli"
	"github.com/initlock/initlock/internal/kubeenv"
	"github.com/initlock/initlock/internal/kubeenv/wire"
	"github.com/initlock/initlock/pkg/initlock"
)

// grantOf reads the grant register of cluster live: the machine it names,
// "" when it is empty.
func (b *Backend) grantOf(t *testing.T, cluster *unstructured.Unstructured) string {
	t.Helper()
	if g := wire.GrantFrom(b.getCluster(t, cluster).GetAnnotations()); g != nil {
		return g.MachineName
	}
	return ""
}

// getCluster reads cluster again, live.
func (b *Backend) getCluster(t *testing.T, cluster *unstructured.Unstructured) *unstructured.Unstructured {
	t.Helper()
	got := &unstructured.Unstructured{}
	got.SetGroupVersionKind(cluster.GroupVersionKind())
	if err := b.Client.Get(t.Context(), client.ObjectKeyFromObject(cluster), got); err != nil {
		t.Fatal(err)
	}
	return got
}

// lockedCluster makes, in a namespace of its own, Cluster c1 whose Machine
// m1 acquired the init lock with the library.
func (b *Backend) lockedCluster(t *testing.T) (string, *unstructured.Unstructured) {
	t.Helper()
	ns := b.Namespace(t)
	cluster := b.newCluster(t, ns, "c1", false)
	m1 := b.newMachine(t, ns, "c1", "m1", nil)
	if res, err := initlock.New(b.Client).Lock(t.Context(), cluster, m1); err != nil || !res.Acquired {
		t.Fatalf("Lock(m1): %+v, %v", res, err)
	}
	return ns, cluster
}

func releaseRefusesWhileInitMayRunThenForce(t *testing.T, b *Backend) {
	ns, cluster := b.lockedCluster(t)
	if b.grantOf(t, cluster) != "m1" {
		t.Fatal("no grant recorded for m1")
	}

	var c kubeenv.Counter
	r := b.run(t, invocation{counter: &c}, "release", "c1", "-n", ns).ExpectCode(t, cli.ExitError)
	r.ErrHas(t, `namespace "`+ns+`": configmap "c1-lock": refusing to release: machine "m1" holds it and the control plane of cluster "c1" is not initialised`, "--force")
	expectN(t, "writes of the refused release", c.Writes(), 0)
	b.expectLock(t, ns, true, r)

	c.Reset()
	r = b.run(t, invocation{counter: &c}, "release", "c1", "-n", ns, "--force", "--yes").ExpectCode(t, cli.ExitOK)
	r.ErrHas(t, "warning: releasing lock")
	r.OutHas(t, `released init lock "c1-lock" of cluster "c1" (holder "m1")`)
	b.expectLock(t, ns, false, r)
	if g := b.grantOf(t, cluster); g != "" {
		t.Fatalf("grant not withdrawn: %s", g)
	}
	expectN(t, "writes (retire the grant, withdraw it, mark the lock for release, delete it)", c.Writes(), 4)
	// Nothing left to release.
	b.run(t, invocation{}, "release", "c1", "-n", ns, "--yes").ExpectCode(t, cli.ExitOK).OutHas(t, "nothing to release")
}

func releaseAfterInitNeedsNoForce(t *testing.T, b *Backend) {
	ns := b.Namespace(t)
	b.held(t, ns, "c1", true)
	b.expectLock(t, ns, false, b.run(t, invocation{}, "release", "c1", "-n", ns, "--yes").ExpectCode(t, cli.ExitOK))
}

// A lock lost while its grant stands is recreated for the holder by the
// next Lock; release empties the grant register, with --force while the
// holder exists and the control plane is not initialised.
func releaseLostLockEmptiesTheGrantRegister(t *testing.T, b *Backend) {
	ctx := t.Context()
	ns, cluster := b.lockedCluster(t)
	if err := kubeenv.ReleaseLock(ctx, b.Client, kubeenv.MustGetLock(t, b.Client, ns, "c1")); err != nil {
		t.Fatal(err)
	}

	var c kubeenv.Counter
	b.run(t, invocation{counter: &c}, "release", "c1", "-n", ns, "--yes").ExpectCode(t, cli.ExitError).
		ErrHas(t, `cluster "c1": refusing to release: its init lock is missing, but its grant register (annotation `+wire.GrantAnnotation+`) names m1`)
	if c.Writes() != 0 || b.grantOf(t, cluster) != "m1" {
		t.Fatalf("refused release wrote %d times; register names %q", c.Writes(), b.grantOf(t, cluster))
	}

	c.Reset()
	b.run(t, invocation{counter: &c}, "release", "c1", "-n", ns, "--force", "--yes").ExpectCode(t, cli.ExitOK).
		OutHas(t, `cluster "c1" has no init lock; emptied its grant register, which named m1`)
	if g := b.grantOf(t, cluster); g != "" {
		t.Fatalf("grant register still names %s", g)
	}
	expectN(t, "writes (retire the grant, then withdraw it)", c.Writes(), 2)
	m2 := b.newMachine(t, ns, "c1", "m2", nil)
	if res, err := initlock.New(b.Client).Lock(ctx, b.getCluster(t, cluster), m2); err != nil || !res.Acquired {
		t.Fatalf("Lock(m2) after the release: %+v, %v; want acquired", res, err)
	}
}

func releaseOrphanAndStaleHolder(t *testing.T, b *Backend) {
	t.Run("orphan whose holder exists is refused", func(t *testing.T) {
		ns := b.Namespace(t)
		b.newMachine(t, ns, "c1", "m1", nil)
		b.newLock(t, ns, "c1", "m1", nil)
		b.run(t, invocation{}, "release", "c1", "-n", ns, "--yes").ExpectCode(t, cli.ExitError).
			ErrHas(t, `cluster "c1" does not exist (a restore may still be bringing it back)`)
	})
	t.Run("holder gone", func(t *testing.T) {
		ns := b.Namespace(t)
		cl := b.newCluster(t, ns, "c1", false)
		b.newLock(t, ns, "c1", "m-gone", cl)
		b.expectLock(t, ns, false, b.run(t, invocation{}, "release", "c1", "-n", ns, "--yes").ExpectCode(t, cli.ExitOK))
	})
}

func releaseCorrupt(t *testing.T, b *Backend) {
	ns := b.Namespace(t)
	cl := b.newCluster(t, ns, "c1", false)
	b.newConfigMap(t, ns, "c1-lock", map[string]string{wire.ClusterNameLabel: "c1"}, map[string]string{wire.DataKey: "{"}, cl)
	b.run(t, invocation{}, "release", "c1", "-n", ns, "--yes").ExpectCode(t, cli.ExitError).ErrHas(t, "so its holder is unknown")
	b.expectLock(t, ns, false, b.run(t, invocation{}, "release", "c1", "-n", ns, "--force", "--yes").ExpectCode(t, cli.ExitOK))
}

func releaseRefusesForeignConfigMapEvenWithForce(t *testing.T, b *Backend) {
	ns := b.Namespace(t)
	b.newCluster(t, ns, "c1", true)
	b.newConfigMap(t, ns, "c1-lock", map[string]string{wire.ClusterNameLabel: "c1"}, map[string]string{"other": "data"}, nil)
	want := `error: namespace "` + ns + `": configmap "c1-lock" is not an init lock (no lock-information key); refusing to touch it`
	for _, args := range [][]string{{"release", "c1", "-n", ns}, {"release", "c1", "-n", ns, "--force"}} {
		var c kubeenv.Counter
		if r := b.run(t, invocation{counter: &c}, args...).ExpectCode(t, cli.ExitError); !strings.HasPrefix(r.Err, want) {
			t.Errorf("stderr:\n%s\nwant prefix:\n%s", r.Err, want)
		}
		expectN(t, strings.Join(args, " ")+": writes", c.Writes(), 0)
	}
	b.expectLock(t, ns, true, Result{})
}

func releaseArguments(t *testing.T, b *Backend) {
	b.run(t, invocation{}, "release").ExpectCode(t, cli.ExitError).ErrHas(t, "accepts 1 arg(s), received 0")
	b.run(t, invocation{}, "release", "Not_A_Name", "-n", "default").ExpectCode(t, cli.ExitError).ErrHas(t, `cluster "Not_A_Name"`)
}
