//go:build e2e

package e2e_test

import (
	"fmt"
	"maps"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/initlock/initlock/internal/kubeenv"
	"github.com/initlock/initlock/pkg/initlock/capi"
)

// The two versions of the add-on in the local repository, both rendered
// from this tree (each with its own image), as clusterctl sees two
// releases of the series v0.1.
const (
	fromVersion = "v0.1.0"
	toVersion   = "v0.1.1"
)

// minDuringUpgrade is the fewest deletes of the held lock the test must
// have sent while clusterctl upgrade ran for its verdict to count.
const minDuringUpgrade = 20

// The lock guard is in force at every moment of "clusterctl upgrade apply"
// and of "clusterctl delete", run with the clusterctl library on a local
// repository of two versions of the add-on, rendered from config/clusterctl
// as a release renders it.
//
// clusterctl upgrade deletes every object of the provider it lists by its
// labels (every object of the components gets them) but the Namespace,
// the CRDs, the inventory and the cluster-scoped kinds of its own list
// (ClusterRole, ClusterRoleBinding, ...) whose names do not start with
// "<namespace>-", and only then creates the new version's objects. A
// ValidatingAdmissionPolicy or its binding is not on that list: clusterctl
// deletes and creates again any the components hold. So the components
// hold no lock guard; the guard is applied with kubectl, in place, from
// config/clusterctl/lock-guard, before "clusterctl init" and again before
// each upgrade (docs/install.md), and clusterctl never touches it.
//
// The steps, as docs/install.md gives them: apply the lock guard, then
// "clusterctl init --addon initlock:v0.1.0"; a Cluster whose control-plane
// Machine holds the init lock; apply the new version's lock guard, then
// "clusterctl upgrade apply --addon initlock-system/initlock:v0.1.1",
// while the lock's delete is sent over and over (server-side dry runs, as
// kubectl sends it and as a bootstrap provider does) and the guard's
// policy and binding are watched: every delete, before, during and after
// the upgrade, is refused by the guard, and the guard is never deleted.
// Then "clusterctl delete --addon initlock --include-namespace", the same
// way: the guard stays, in force, until it is deleted by hand, as the
// uninstall of docs/install.md does; clusterctl leaves the ClusterRoles
// and the ClusterRoleBinding too, which the uninstall deletes by hand.
// clusterctl reaches the API server 10 ms away (clusterctlLatency).
//
// With the guard in the components instead, the upgrade deletes its
// policy and binding and creates them again about a second later, and the
// API server, which reloads its policies once a second, lets about 200 of
// the deletes through.
func TestClusterctlUpgradeKeepsLockGuard(t *testing.T) {
	mgmt, kubeconfig := startManagementCluster(t)
	cc := clusterctl{program: addonProgramPath(t), config: addonRepository(t, fromVersion, toVersion), kubeconfig: kubeconfig}
	components := func(v string) string {
		return filepath.Join(filepath.Dir(cc.config), addonLabel, v, "addon-components.yaml")
	}
	noLockGuardIn(t, components(fromVersion))
	noLockGuardIn(t, components(toVersion))

	// The install: the lock guard, then the add-on.
	guard := applyLockGuard(t, mgmt)
	sameLockGuard(t, guard)
	cc.run(t, "init", "initlock:"+fromVersion)
	expectInstalled(t, mgmt, fromVersion)

	// A Cluster whose first control-plane Machine ran kubeadm init and
	// holds the lock.
	ns := mgmt.Namespace(t)
	cluster := kubeenv.NewCluster(capi.V1Beta2, ns, clusterName)
	create(t, mgmt, cluster)
	create(t, mgmt, newMachine(cluster, holderName))
	lock := kubeenv.NewLock(ns, clusterName, holderName, cluster)
	create(t, mgmt, lock)
	guardAnswers(t, mgmt, lock, true, 30*time.Second)

	inventory := &unstructured.Unstructured{}
	inventory.SetAPIVersion(clusterctlGroup + "/v1alpha3")
	inventory.SetKind("Provider")
	inventory.SetName(addonLabel)
	refs := installRefs(t, mgmt, components(fromVersion), append(guard, inventory)...)
	installed := uids(t, mgmt, refs)
	for r, uid := range installed {
		if uid == "" {
			t.Fatalf("%s is missing after clusterctl init", r)
		}
	}

	// The upgrade.
	applyLockGuard(t, mgmt)
	upgrade := whileDeleting(t, mgmt, lock, func() addonRun {
		return cc.run(t, "upgrade", addonNamespace+"/initlock:"+toVersion)
	}, nil)
	upgraded := uids(t, mgmt, refs)
	expectFates(t, "clusterctl upgrade apply", fates(installed, upgraded), func(r objectRef) string {
		switch {
		case r.name == lockGuardName:
			return kept // applied with kubectl: clusterctl never lists it
		case r.kind == "Namespace", r.kind == "Provider":
			return kept // not deleted on upgrade: the namespace, the inventory
		case r.kind == "ClusterRole", r.kind == "ClusterRoleBinding":
			return kept // named initlock-…, not initlock-system-…: skipped, then patched
		default:
			return recreated // every other object, the guardrail's policy and binding among them
		}
	})
	expectInstalled(t, mgmt, toVersion)
	expectLockKept(t, mgmt, lock)
	if t.Failed() {
		t.Logf("clusterctl upgrade's log:\n%s", upgrade.Log)
	}

	// The delete, with the Namespace.
	namespace := &corev1.Namespace{}
	namespace.Name = addonNamespace
	del := whileDeleting(t, mgmt, lock, func() addonRun {
		return cc.run(t, "delete", "initlock", "-include-namespace")
	}, func() {
		// The namespace controller deletes what the Namespace holds.
		kubeenv.WaitGone(t, mgmt.Client, namespace)
	})
	deleted := uids(t, mgmt, refs)
	expectFates(t, "clusterctl delete --include-namespace", fates(upgraded, deleted), func(r objectRef) string {
		switch {
		case r.name == lockGuardName:
			return kept
		case r.kind == "ClusterRole", r.kind == "ClusterRoleBinding":
			return kept // left behind
		default:
			return gone
		}
	})
	expectLockKept(t, mgmt, lock)
	if t.Failed() {
		t.Logf("clusterctl delete's log:\n%s", del.Log)
	}

	// What docs/install.md's uninstall deletes by hand: the guard, then the
	// ClusterRoles and the ClusterRoleBinding clusterctl left.
	var leftovers []client.Object
	for r, f := range fates(upgraded, deleted) {
		if f != kept {
			continue
		}
		leftovers = append(leftovers, r.object())
	}
	kubeenv.DeleteAndWait(t, mgmt.Client, leftovers...)
	guardAnswers(t, mgmt, lock, false, 30*time.Second)
}

// whileDeleting runs run (a clusterctl command) while the held lock's
// delete is sent over and over and the lock guard is watched, from half a
// second before it starts until two seconds after it ends (and after
// settle, when not nil), and fails t unless the guard refused every delete
// and was never deleted. It fails t too when fewer than minDuringUpgrade
// deletes were answered while run ran.
func whileDeleting(t *testing.T, e *kubeenv.Env, lock *corev1.ConfigMap, run func() addonRun, settle func()) addonRun {
	t.Helper()
	w := watchLockGuard(t, e)
	d := startLockDeleter(t, e, lock)
	time.Sleep(500 * time.Millisecond)
	r := run()
	if settle != nil {
		settle()
	}
	// The API server enforces a policy created or changed some time after
	// the write: two seconds more show whether the guard is back in force.
	time.Sleep(2 * time.Second)
	attempts := d.finish()
	events := w.finish()
	c := countDeletes(attempts, r)
	t.Logf("clusterctl %s: %d deletes of the held lock answered before it, %d while it ran (%.2fs), %d after; %d not refused by the lock guard",
		r.Command, c.before, c.during, r.End.Sub(r.Start).Seconds(), c.after, len(c.notRefused))
	var seen, bad []string
	for _, ev := range events {
		line := fmt.Sprintf("+%dms after clusterctl %s started: %s", ev.at.Sub(r.Start).Milliseconds(), r.Command, ev.what)
		seen = append(seen, line)
		if ev.bad {
			bad = append(bad, line)
		}
	}
	if len(seen) > 0 {
		t.Logf("the lock guard's policy and binding changed:\n  %s", strings.Join(seen, "\n  "))
	}
	if len(c.notRefused) > 0 {
		shown := c.notRefused
		if len(shown) > 10 {
			shown = append(shown[:5:5], append([]string{"..."}, shown[len(shown)-5:]...)...)
		}
		t.Errorf("clusterctl %s: %d of %d deletes of the held lock %s/%s were not refused by the lock guard:\n  %s",
			r.Command, len(c.notRefused), len(attempts), lock.Namespace, lock.Name, strings.Join(shown, "\n  "))
	}
	if len(bad) > 0 {
		t.Errorf("clusterctl %s: the lock guard went:\n  %s", r.Command, strings.Join(bad, "\n  "))
	}
	if c.during < minDuringUpgrade {
		t.Errorf("clusterctl %s: only %d deletes answered while it ran, want %d at least", r.Command, c.during, minDuringUpgrade)
	}
	return r
}

// expectFates logs the fate of each object, one a line in a stable order,
// and fails t unless each met the fate want gives it.
func expectFates(t *testing.T, what string, got map[objectRef]string, want func(objectRef) string) {
	t.Helper()
	var b strings.Builder
	for _, r := range slices.SortedFunc(maps.Keys(got), func(a, b objectRef) int { return strings.Compare(a.String(), b.String()) }) {
		fmt.Fprintf(&b, "  %-72s %s\n", r, got[r])
		if w := want(r); got[r] != w {
			t.Errorf("%s: %s %s, want %s", what, r, got[r], w)
		}
	}
	t.Logf("%s:\n%s", what, b.String())
}

// expectInstalled checks the inventory's version of the add-on and the
// manager image of its Deployment.
func expectInstalled(t *testing.T, e *kubeenv.Env, version string) {
	t.Helper()
	p := &unstructured.Unstructured{}
	p.SetAPIVersion(clusterctlGroup + "/v1alpha3")
	p.SetKind("Provider")
	if err := e.Client.Get(t.Context(), client.ObjectKey{Namespace: addonNamespace, Name: addonLabel}, p); err != nil {
		t.Fatalf("reading the inventory's %s: %v", addonLabel, err)
	}
	if v, _, _ := unstructured.NestedString(p.Object, "version"); v != version {
		t.Errorf("the inventory records %s %s, want %s", addonLabel, v, version)
	}
	d := &appsv1.Deployment{}
	if err := e.Client.Get(t.Context(), client.ObjectKey{Namespace: addonNamespace, Name: "initlock-controller-manager"}, d); err != nil {
		t.Fatalf("reading the manager's Deployment: %v", err)
	}
	if img := d.Spec.Template.Spec.Containers[0].Image; img != addonImage+version {
		t.Errorf("the manager's Deployment runs %s, want %s", img, addonImage+version)
	}
}

// expectLockKept fails t unless lock is still there, the same object.
func expectLockKept(t *testing.T, e *kubeenv.Env, lock *corev1.ConfigMap) {
	t.Helper()
	cm := &corev1.ConfigMap{}
	err := e.Client.Get(t.Context(), client.ObjectKeyFromObject(lock), cm)
	switch {
	case apierrors.IsNotFound(err):
		t.Errorf("lock %s/%s is gone", lock.Namespace, lock.Name)
	case err != nil:
		t.Fatal(err)
	case cm.UID != lock.UID:
		t.Errorf("lock %s/%s is another object (uid %s, was %s)", lock.Namespace, lock.Name, cm.UID, lock.UID)
	}
}

// noLockGuardIn fails t if the components file at path holds the lock
// guard: clusterctl upgrade would delete it before creating it again.
func noLockGuardIn(t *testing.T, path string) {
	t.Helper()
	objs, err := kubeenv.ReadObjects(path)
	if err != nil {
		t.Fatal(err)
	}
	for _, o := range objs {
		if o.GetName() == lockGuardName {
			t.Errorf("%s holds %s %s: clusterctl upgrade deletes it, then creates it again", filepath.Base(path), o.GetKind(), o.GetName())
		}
	}
}
