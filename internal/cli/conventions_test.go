package cli_test

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/tools/clientcmd"
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
func unownedFleet(t *testing.T, ns string) {
	t.Helper()
	for name, labels := range map[string]map[string]string{"c1": {"env": "prod"}, "c2": {"env": "dev"}, "c3": nil} {
		newCluster(t, ns, name, false, labelled(labels))
		newMachine(t, ns, name, "m-"+name, nil)
		newLock(t, ns, name, "m-"+name, nil)
	}
	newLock(t, ns, "c-gone", "m-gone", nil)
}

// -l selects Clusters by label, for list and repair: the locks of other
// Clusters, and orphans, are left out, at the same number of requests.
func TestSelector(t *testing.T) {
	ns := env.Namespace(t)
	unownedFleet(t, ns)
	var c kubeenv.Counter
	r := invocation{wrap: counting(&c)}.run(t, "list", "-n", ns, "-l", "env=prod", "-o", "name")
	r.expectCode(t, cli.ExitOK)
	if r.out != "configmap/c1-lock\n" {
		t.Errorf("list -l env=prod -o name:\n%s", r.out)
	}
	// Clusters, labelled ConfigMaps and Machines: every selected Cluster
	// has its lock, so no search for foreign ConfigMaps.
	if got := c.Count("list"); got != 3 {
		t.Errorf("lists = %d, want 3", got)
	}
	r = run(t, "list", "-n", ns, "-l", "env", "-o", "name")
	r.expectCode(t, cli.ExitOK)
	if r.out != "configmap/c1-lock\nconfigmap/c2-lock\n" {
		t.Errorf("list -l env -o name:\n%s", r.out)
	}
	r = run(t, "list", "-n", ns, "-l", "env in (")
	r.expectCode(t, cli.ExitError)
	if !strings.Contains(r.err, `invalid selector "env in ("`) {
		t.Errorf("bad selector: %s", r.err)
	}
	r = run(t, "list", "c1", "-n", ns, "-l", "env=prod")
	r.expectCode(t, cli.ExitError)
	if !strings.Contains(r.err, "a CLUSTER cannot be given with a selector") {
		t.Errorf("CLUSTER with -l: %s", r.err)
	}

	c.Reset()
	r = invocation{wrap: counting(&c)}.run(t, "repair", "-n", ns, "-l", "env!=prod,env", "--yes")
	r.expectCode(t, cli.ExitOK)
	if got := c.Writes(); got != 1 || !strings.Contains(r.out, "adopted     "+ns+"/c2-lock") {
		t.Errorf("repair -l made %d writes:\n%s", got, r.out)
	}
	got := byCluster(listJSON(t, ns))
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
func TestOutputNameAndNoHeaders(t *testing.T) {
	ns := env.Namespace(t)
	fleet(t, ns)
	r := run(t, "list", "-n", ns, "-o", "name", "--show-free")
	r.expectCode(t, cli.ExitOK)
	want := []string{"configmap/c-corrupt-lock", "configmap/c-foreign-lock", "cluster.cluster.x-k8s.io/c-free", "configmap/c-healthy-lock",
		"configmap/c-held-lock", "configmap/c-init-lock", "cluster.cluster.x-k8s.io/c-lost", "configmap/c-orphan-lock",
		"configmap/c-paused-lock", "configmap/c-stale-lock", "configmap/c-unowned-lock", "configmap/c-wrong-lock"}
	if r.out != strings.Join(want, "\n")+"\n" {
		t.Errorf("-o name:\n%s", r.out)
	}
	// Every name is one that kubectl get takes.
	for _, n := range want {
		kind, name, _ := strings.Cut(n, "/")
		switch kind {
		case "configmap":
			if cm, err := kubeenv.GetLock(t.Context(), env.Client, ns, strings.TrimSuffix(name, "-lock")); cm == nil || err != nil {
				t.Errorf("%s: no such ConfigMap (%v)", n, err)
			}
		case "cluster." + capi.Group:
			u := &unstructured.Unstructured{}
			u.SetGroupVersionKind(capi.ClusterGVK(capi.V1Beta2))
			if err := env.Client.Get(t.Context(), client.ObjectKey{Namespace: ns, Name: name}, u); err != nil {
				t.Errorf("%s: %v", n, err)
			}
		default:
			t.Errorf("%s: unexpected type", n)
		}
	}
	for _, o := range []string{"table", "wide"} {
		with := run(t, "list", "-n", ns, "-o", o)
		with.expectCode(t, cli.ExitOK)
		without := run(t, "list", "-n", ns, "-o", o, "--no-headers")
		without.expectCode(t, cli.ExitOK)
		lines := strings.SplitAfter(with.out, "\n")
		if !strings.HasPrefix(lines[0], "NAMESPACE") || strings.Contains(without.out, "NAMESPACE") || len(strings.SplitAfter(without.out, "\n")) != len(lines)-1 {
			t.Errorf("-o %s --no-headers:\n%s\nwith headers:\n%s", o, without.out, with.out)
		}
	}
}

// Without any kubeconfig, the plugin says so and how to give one, and
// never connects to http://localhost:8080.
func TestNoKubeconfig(t *testing.T) {
	t.Setenv("KUBERNETES_SERVICE_HOST", "")
	t.Setenv("KUBERNETES_SERVICE_PORT", "")
	// KUBECONFIG naming a missing file hides ~/.kube/config, as in kubectl.
	missing := filepath.Join(t.TempDir(), "nope")
	t.Setenv("KUBECONFIG", missing)
	for _, args := range [][]string{{"list", "-A"}, {"repair", "-A", "--yes"}, {"release", "c1"}} {
		r := invocation{noKubeconfig: true}.run(t, args...)
		r.expectCode(t, cli.ExitError)
		want := `error: no kubeconfig found (KUBECONFIG="` + missing + `" names no file that holds a cluster), and this is not a Pod with a service account: ` +
			"kubectl-initlock reads the kubeconfig as kubectl does: pass --kubeconfig, set KUBECONFIG, or create ~/.kube/config"
		if !strings.HasPrefix(r.err, want) || strings.Contains(r.err, "8080") {
			t.Errorf("%v: stderr %q\nwant prefix %q", args, r.err, want)
		}
	}
	if _, err := os.Stat(clientcmd.RecommendedHomeFile); err == nil {
		t.Logf("%s exists: the case without KUBECONFIG is not checked here", clientcmd.RecommendedHomeFile)
		return
	}
	t.Setenv("KUBECONFIG", "")
	r := invocation{noKubeconfig: true}.run(t, "list")
	r.expectCode(t, cli.ExitError)
	if want := "error: no kubeconfig found (KUBECONFIG is not set, and " + clientcmd.RecommendedHomeFile + " does not exist or holds no cluster)"; !strings.HasPrefix(r.err, want) {
		t.Errorf("stderr %q\nwant prefix %q", r.err, want)
	}
}

// repair and release ask before they change anything, whether their
// output is a terminal or not; with no answer they change nothing.
func TestDestructiveCommandsAskWhateverTheOutput(t *testing.T) {
	setup := func(t *testing.T) string {
		ns := env.Namespace(t)
		cl := newCluster(t, ns, "c1", true)
		newMachine(t, ns, "c1", "m1", nil)
		newLock(t, ns, "c1", "m1", cl)
		return ns
	}
	for _, cmd := range [][]string{{"repair"}, {"release", "c1"}} {
		t.Run(cmd[0], func(t *testing.T) {
			ns := setup(t)
			for _, stdin := range []string{"", "n\n", "whatever\n"} {
				var c kubeenv.Counter
				r := invocation{stdin: stdin, wrap: counting(&c)}.run(t, append(cmd, "-n", ns)...)
				r.expectCode(t, cli.ExitError)
				if !strings.Contains(r.err, "[y/N]: ") || !strings.Contains(r.err, "aborted; nothing was changed (--yes") || c.Writes() != 0 {
					t.Errorf("stdin %q: %d writes\nstdout:\n%s\nstderr:\n%s", stdin, c.Writes(), r.out, r.err)
				}
			}
			var c kubeenv.Counter
			r := invocation{stdin: "y\n", wrap: counting(&c)}.run(t, append(cmd, "-n", ns)...)
			r.expectCode(t, cli.ExitOK)
			if c.Writes() == 0 || kubeenv.MustGetLock(t, env.Client, ns, "c1") != nil {
				t.Errorf("answered y: %d writes\nstdout:\n%s\nstderr:\n%s", c.Writes(), r.out, r.err)
			}
		})
	}
}

// release --dry-run says what it would release and changes nothing;
// release --force asks, saying why it is dangerous, before it acts.
func TestReleaseDryRunAndForceAsks(t *testing.T) {
	ns, _ := lockedCluster(t)
	var c kubeenv.Counter
	r := invocation{wrap: counting(&c)}.run(t, "release", "c1", "-n", ns, "--dry-run")
	r.expectCode(t, cli.ExitError) // refused without --force, as the release would be
	if !strings.Contains(r.err, "refusing to release") || c.Writes() != 0 {
		t.Errorf("dry run without --force: %d writes, stderr:\n%s", c.Writes(), r.err)
	}
	r = invocation{wrap: counting(&c)}.run(t, "release", "c1", "-n", ns, "--dry-run=client", "--force")
	r.expectCode(t, cli.ExitOK)
	want := `namespace "` + ns + `": would release lock "c1-lock" of cluster "c1" (holder "m1"), although machine "m1" holds it and the control plane of cluster "c1" is not initialised (--force).` +
		"\nDry run: nothing was changed.\n"
	if r.out != want || c.Writes() != 0 {
		t.Errorf("dry run with --force: %d writes\nstdout %q\nwant   %q", c.Writes(), r.out, want)
	}
	r = invocation{wrap: counting(&c), stdin: "n\n"}.run(t, "release", "c1", "-n", ns, "--force")
	r.expectCode(t, cli.ExitError)
	if !strings.Contains(r.err, "warning: releasing lock \"c1-lock\" of cluster \"c1\" (holder \"m1\") although machine \"m1\" holds it") ||
		!strings.Contains(r.err, "Release it anyway? [y/N]: ") || c.Writes() != 0 {
		t.Errorf("--force declined: %d writes, stderr:\n%s", c.Writes(), r.err)
	}
	r = invocation{wrap: counting(&c), stdin: "yes\n"}.run(t, "release", "c1", "-n", ns, "--force")
	r.expectCode(t, cli.ExitOK)
	if kubeenv.MustGetLock(t, env.Client, ns, "c1") != nil {
		t.Errorf("--force accepted, lock still there; stderr:\n%s", r.err)
	}
	r = run(t, "release", "c1", "-n", ns, "--dry-run=server")
	r.expectCode(t, cli.ExitError)
	if !strings.Contains(r.err, "--dry-run=server is not supported") {
		t.Errorf("stderr: %s", r.err)
	}
}

// repair CLUSTER repairs that cluster's lock only, and fails with NotFound
// for a name with neither a Cluster nor a lock.
func TestRepairOneCluster(t *testing.T) {
	ns := env.Namespace(t)
	unownedFleet(t, ns)
	var c kubeenv.Counter
	r := invocation{wrap: counting(&c)}.run(t, "repair", "c3", "-n", ns, "--yes")
	r.expectCode(t, cli.ExitOK)
	if c.Writes() != 1 || !strings.Contains(r.out, "adopted     "+ns+"/c3-lock") || strings.Contains(r.out, "c1-lock") {
		t.Errorf("repair c3 made %d writes:\n%s", c.Writes(), r.out)
	}
	for cluster, owner := range map[string]string{"c1": "missing", "c2": "missing", "c3": "ok"} {
		if got := byCluster(listJSON(t, ns))[cluster].Owner; got != owner {
			t.Errorf("%s: owner %q, want %q", cluster, got, owner)
		}
	}
	r = run(t, "repair", "nope", "-n", ns, "--yes")
	r.expectCode(t, cli.ExitError)
	if want := `Error from server (NotFound): clusters.cluster.x-k8s.io "nope" not found` + "\n"; !strings.HasSuffix(r.err, want) {
		t.Errorf("repair nope: stderr %q", r.err)
	}
	r = run(t, "repair", "c1", "-A")
	r.expectCode(t, cli.ExitError)
	if !strings.Contains(r.err, "drop -A or the cluster name") {
		t.Errorf("repair c1 -A: %s", r.err)
	}
}

// list judges with the installed manager's settings, its scope included: a
// lock of a Cluster outside the manager's --watch-filter gets no action in
// list -o wide and JSON, and repair leaves it, saying why.
func TestListShowsOnlyWhatTheManagerDoes(t *testing.T) {
	ns := env.Namespace(t)
	watched := newCluster(t, ns, "c-watched", true, labelled(map[string]string{capi.WatchFilterLabel: "fleet-a"}))
	newMachine(t, ns, "c-watched", "m-watched", nil)
	newLock(t, ns, "c-watched", "m-watched", watched)
	other := newCluster(t, ns, "c-other", true)
	newMachine(t, ns, "c-other", "m-other", nil)
	newLock(t, ns, "c-other", "m-other", other)
	managerDeployment(t, ns, "--leader-elect", "--watch-filter", "fleet-a", "--orphan-grace=30m")
	deployment := "Deployment " + ns + "/initlock-controller-manager (--watch-filter=fleet-a)"

	r := run(t, "list", "-n", ns, "-o", "json")
	r.expectCode(t, cli.ExitOK)
	var l cli.LockList
	if err := json.Unmarshal([]byte(r.out), &l); err != nil {
		t.Fatal(err)
	}
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
	r = run(t, "list", "-n", ns, "-o", "wide")
	r.expectCode(t, cli.ExitOK)
	if r.err != "Using the policy of "+deployment+": --release-after-init=true --orphan-grace=30m0s\n" {
		t.Errorf("list -o wide stderr: %q", r.err)
	}

	// A release is two writes: the release mark, then the delete.
	var c kubeenv.Counter
	r = invocation{wrap: counting(&c)}.run(t, "repair", "-n", ns, "--yes")
	r.expectCode(t, cli.ExitOK)
	if c.Writes() != 2 || !strings.Contains(r.out, "released    "+ns+"/c-watched-lock") ||
		!strings.Contains(r.out, "no initlock-manager handles this cluster ("+deployment+"): release is left to whoever handles it") {
		t.Errorf("repair made %d writes:\n%s", c.Writes(), r.out)
	}
	// Both policy flags judge every lock, as an operator asks.
	c.Reset()
	r = invocation{wrap: counting(&c)}.run(t, "repair", "-n", ns, "--yes", "--release-after-init=true", "--orphan-grace=10m")
	r.expectCode(t, cli.ExitOK)
	if c.Writes() != 2 || !strings.Contains(r.out, "released    "+ns+"/c-other-lock") {
		t.Errorf("repair with both flags made %d writes:\n%s", c.Writes(), r.out)
	}
}
