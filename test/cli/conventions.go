package clisuite

import (
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/initlock/initlock/internal/cli"
	"github.com/initlock/initlock/internal/kubeenv"
	"github.com/initlock/initlock/pkg/initlock/capi"
)

// labelled makes a Cluster carry labels.
func labelled(labels map[string]string) clusterOpt {
	return func(u *unstructured.Unstructured) { u.SetLabels(labels) }
}

// unownedFleet makes, in ns, clusters c1 (env=prod), c2 (env=dev) and c3
// (no label), each with a lock that lost its ownerReference, and an orphan
// lock of c-gone.
func (b *Backend) unownedFleet(t *testing.T, ns string) {
	t.Helper()
	for name, labels := range map[string]map[string]string{"c1": {"env": "prod"}, "c2": {"env": "dev"}, "c3": nil} {
		b.unowned(t, ns, name, labelled(labels))
	}
	b.newLock(t, ns, "c-gone", "m-gone", nil)
}

// -l selects Clusters by label, for list and repair: the locks of other
// Clusters, and orphans, are left out, at the same number of requests.
func selector(t *testing.T, b *Backend) {
	ns := b.Namespace(t)
	b.unownedFleet(t, ns)
	var c kubeenv.Counter
	for selector, want := range map[string]string{"env=prod": "configmap/c1-lock\n", "env": "configmap/c1-lock\nconfigmap/c2-lock\n"} {
		c.Reset()
		if r := b.run(t, invocation{counter: &c}, "list", "-n", ns, "-l", selector, "-o", "name").ExpectCode(t, cli.ExitOK); r.Out != want {
			t.Errorf("list -l %s -o name:\n%s", selector, r.Out)
		}
		// Clusters, labelled ConfigMaps and Machines: every selected
		// Cluster has its lock, so no search for foreign ConfigMaps.
		expectN(t, "lists", c.Count("list"), 3)
	}
	b.run(t, invocation{}, "list", "-n", ns, "-l", "env in (").ExpectCode(t, cli.ExitError).ErrHas(t, `invalid selector "env in ("`)
	b.run(t, invocation{}, "list", "c1", "-n", ns, "-l", "env=prod").ExpectCode(t, cli.ExitError).ErrHas(t, "a CLUSTER cannot be given with a selector")

	c.Reset()
	b.run(t, invocation{counter: &c}, "repair", "-n", ns, "-l", "env!=prod,env", "--yes").ExpectCode(t, cli.ExitOK).OutHas(t, "adopted     "+ns+"/c2-lock")
	expectN(t, "writes of repair -l", c.Writes(), 1)
	got := byCluster(b.listJSON(t, ns))
	for cluster, owner := range map[string]string{"c1": "missing", "c2": "ok", "c3": "missing"} {
		if got[cluster].Owner != owner {
			t.Errorf("%s after repair -l: owner %q, want %q", cluster, got[cluster].Owner, owner)
		}
	}
	if got["c-gone"].ClusterAbsentSince != "" {
		t.Errorf("repair -l marked the orphan, which no selector selects: %+v", got["c-gone"])
	}
}

// -o name prints TYPE/NAME, kubectl's way: the lock, or the Cluster of a
// row without one; --no-headers leaves the header out of the tables.
func outputNameAndNoHeaders(t *testing.T, b *Backend) {
	ns := b.Namespace(t)
	b.fleet(t, ns)
	r := b.run(t, invocation{}, "list", "-n", ns, "-o", "name", "--show-free").ExpectCode(t, cli.ExitOK)
	want := []string{"configmap/c-corrupt-lock", "configmap/c-foreign-lock", "cluster.cluster.x-k8s.io/c-free", "configmap/c-healthy-lock",
		"configmap/c-held-lock", "configmap/c-init-lock", "cluster.cluster.x-k8s.io/c-lost", "configmap/c-orphan-lock",
		"configmap/c-paused-lock", "configmap/c-stale-lock", "configmap/c-unowned-lock", "configmap/c-wrong-lock"}
	if r.Out != strings.Join(want, "\n")+"\n" {
		t.Errorf("-o name:\n%s", r.Out)
	}
	// Every name is one that kubectl get takes.
	for _, n := range want {
		kind, name, _ := strings.Cut(n, "/")
		switch kind {
		case "configmap":
			if cm, err := kubeenv.GetLock(t.Context(), b.Client, ns, strings.TrimSuffix(name, "-lock")); cm == nil || err != nil {
				t.Errorf("%s: no such ConfigMap (%v)", n, err)
			}
		case "cluster." + capi.Group:
			if err := b.Client.Get(t.Context(), client.ObjectKey{Namespace: ns, Name: name}, kubeenv.NewCluster(capi.V1Beta2, ns, name)); err != nil {
				t.Errorf("%s: %v", n, err)
			}
		default:
			t.Errorf("%s: unexpected type", n)
		}
	}
	for _, o := range []string{"table", "wide"} {
		with := b.run(t, invocation{}, "list", "-n", ns, "-o", o).ExpectCode(t, cli.ExitOK)
		without := b.run(t, invocation{}, "list", "-n", ns, "-o", o, "--no-headers").ExpectCode(t, cli.ExitOK)
		lines := strings.SplitAfter(with.Out, "\n")
		if !strings.HasPrefix(lines[0], "NAMESPACE") || strings.Contains(without.Out, "NAMESPACE") || len(strings.SplitAfter(without.Out, "\n")) != len(lines)-1 {
			t.Errorf("-o %s --no-headers:\n%s\nwith headers:\n%s", o, without.Out, with.Out)
		}
	}
}

// repair and release ask before they change anything, whether their
// output is a terminal or not; with no answer they change nothing.
func destructiveCommandsAskWhateverTheOutput(t *testing.T, b *Backend) {
	for _, cmd := range [][]string{{"repair"}, {"release", "c1"}} {
		t.Run(cmd[0], func(t *testing.T) {
			ns := b.Namespace(t)
			b.held(t, ns, "c1", true)
			for _, stdin := range []string{"", "n\n", "whatever\n"} {
				var c kubeenv.Counter
				r := b.run(t, invocation{stdin: stdin, counter: &c}, append(cmd, "-n", ns)...).ExpectCode(t, cli.ExitError)
				if !strings.Contains(r.Err, "[y/N]: ") || !strings.Contains(r.Err, "aborted; nothing was changed (--yes") || c.Writes() != 0 {
					t.Errorf("stdin %q: %d writes\nstdout:\n%s\nstderr:\n%s", stdin, c.Writes(), r.Out, r.Err)
				}
			}
			var c kubeenv.Counter
			r := b.run(t, invocation{stdin: "y\n", counter: &c}, append(cmd, "-n", ns)...).ExpectCode(t, cli.ExitOK)
			if c.Writes() == 0 || kubeenv.MustGetLock(t, b.Client, ns, "c1") != nil {
				t.Errorf("answered y: %d writes\nstdout:\n%s\nstderr:\n%s", c.Writes(), r.Out, r.Err)
			}
		})
	}
}

// release --dry-run says what it would release and changes nothing;
// release --force asks, saying why it is dangerous, before it acts.
func releaseDryRunAndForceAsks(t *testing.T, b *Backend) {
	ns, _ := b.lockedCluster(t)
	var c kubeenv.Counter
	// Refused without --force, as the release would be.
	b.run(t, invocation{counter: &c}, "release", "c1", "-n", ns, "--dry-run").ExpectCode(t, cli.ExitError).ErrHas(t, "refusing to release")
	expectN(t, "writes of a dry run without --force", c.Writes(), 0)
	r := b.run(t, invocation{counter: &c}, "release", "c1", "-n", ns, "--dry-run=client", "--force").ExpectCode(t, cli.ExitOK)
	want := `namespace "` + ns + `": would release lock "c1-lock" of cluster "c1" (holder "m1"), although machine "m1" holds it and the control plane of cluster "c1" is not initialised (--force).` +
		"\nDry run: nothing was changed.\n"
	if r.Out != want || c.Writes() != 0 {
		t.Errorf("dry run with --force: %d writes\nstdout %q\nwant   %q", c.Writes(), r.Out, want)
	}
	b.run(t, invocation{counter: &c, stdin: "n\n"}, "release", "c1", "-n", ns, "--force").ExpectCode(t, cli.ExitError).
		ErrHas(t, "warning: releasing lock \"c1-lock\" of cluster \"c1\" (holder \"m1\") although machine \"m1\" holds it", "Release it anyway? [y/N]: ")
	expectN(t, "writes of --force declined", c.Writes(), 0)
	r = b.run(t, invocation{counter: &c, stdin: "yes\n"}, "release", "c1", "-n", ns, "--force").ExpectCode(t, cli.ExitOK)
	if kubeenv.MustGetLock(t, b.Client, ns, "c1") != nil {
		t.Errorf("--force accepted, lock still there; stderr:\n%s", r.Err)
	}
	b.run(t, invocation{}, "release", "c1", "-n", ns, "--dry-run=server").ExpectCode(t, cli.ExitError).ErrHas(t, "--dry-run=server is not supported")
}

// repair CLUSTER repairs that cluster's lock only, and fails with NotFound
// for a name with neither a Cluster nor a lock.
func repairOneCluster(t *testing.T, b *Backend) {
	ns := b.Namespace(t)
	b.unownedFleet(t, ns)
	var c kubeenv.Counter
	r := b.run(t, invocation{counter: &c}, "repair", "c3", "-n", ns, "--yes").ExpectCode(t, cli.ExitOK)
	if c.Writes() != 1 || !strings.Contains(r.Out, "adopted     "+ns+"/c3-lock") || strings.Contains(r.Out, "c1-lock") {
		t.Errorf("repair c3 made %d writes:\n%s", c.Writes(), r.Out)
	}
	for cluster, owner := range map[string]string{"c1": "missing", "c2": "missing", "c3": "ok"} {
		if got := byCluster(b.listJSON(t, ns))[cluster].Owner; got != owner {
			t.Errorf("%s: owner %q, want %q", cluster, got, owner)
		}
	}
	r = b.run(t, invocation{}, "repair", "nope", "-n", ns, "--yes").ExpectCode(t, cli.ExitError)
	if want := `Error from server (NotFound): clusters.cluster.x-k8s.io "nope" not found` + "\n"; !strings.HasSuffix(r.Err, want) {
		t.Errorf("repair nope: stderr %q", r.Err)
	}
	b.run(t, invocation{}, "repair", "c1", "-A").ExpectCode(t, cli.ExitError).ErrHas(t, "drop -A or the cluster name")
}

// list judges with the installed manager's settings, its scope included: a
// lock of a Cluster outside the manager's --watch-filter gets no action in
// list -o wide and JSON, and repair leaves it, saying why.
func listShowsOnlyWhatTheManagerDoes(t *testing.T, b *Backend) {
	ns := b.Namespace(t)
	b.held(t, ns, "c-watched", true, labelled(map[string]string{capi.WatchFilterLabel: "fleet-a"}))
	b.held(t, ns, "c-other", true)
	b.managerDeployment(t, ns, "--leader-elect", "--watch-filter", "fleet-a", "--orphan-grace=30m")
	deployment := "Deployment " + ns + "/initlock-controller-manager (--watch-filter=fleet-a)"

	l := b.listJSON(t, ns)
	got := byCluster(l)
	if got["c-watched"].Action != "release" || got["c-watched"].Problem != "" {
		t.Errorf("watched cluster: %+v", got["c-watched"])
	}
	if got["c-other"].Action != "none" || got["c-other"].Problem != "no initlock-manager handles this cluster ("+deployment+")" {
		t.Errorf("cluster outside the watch filter: %+v", got["c-other"])
	}
	if l.PolicySource != deployment || l.Policy.OrphanGrace != "30m0s" {
		t.Errorf("policy %+v from %q", l.Policy, l.PolicySource)
	}
	if r := b.run(t, invocation{}, "list", "-n", ns, "-o", "wide").ExpectCode(t, cli.ExitOK); r.Err != "Using the policy of "+deployment+": --release-after-init=true --orphan-grace=30m0s\n" {
		t.Errorf("list -o wide stderr: %q", r.Err)
	}

	// A release is two writes: the release mark, then the delete.
	var c kubeenv.Counter
	r := b.run(t, invocation{counter: &c}, "repair", "-n", ns, "--yes").ExpectCode(t, cli.ExitOK)
	if c.Writes() != 2 || !strings.Contains(r.Out, "released    "+ns+"/c-watched-lock") ||
		!strings.Contains(r.Out, "no initlock-manager handles this cluster ("+deployment+"): release is left to whoever handles it") {
		t.Errorf("repair made %d writes:\n%s", c.Writes(), r.Out)
	}
	// Both policy flags judge every lock, as an operator asks.
	c.Reset()
	r = b.run(t, invocation{counter: &c}, "repair", "-n", ns, "--yes", "--release-after-init=true", "--orphan-grace=10m").ExpectCode(t, cli.ExitOK)
	if c.Writes() != 2 || !strings.Contains(r.Out, "released    "+ns+"/c-other-lock") {
		t.Errorf("repair with both flags made %d writes:\n%s", c.Writes(), r.Out)
	}
}
