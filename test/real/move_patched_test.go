//go:build real

package real_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/initlock/initlock/internal/kubeenv"
	"github.com/initlock/initlock/internal/kubeenv/stack"
	"github.com/initlock/initlock/internal/kubeenv/wire"
)

// The clusterctl inventory as "clusterctl init" leaves it, and the user the
// move runs as in both management clusters' audit logs.
const (
	clusterctlLabel     = "clusterctl.cluster.x-k8s.io"
	clusterctlGroup     = "clusterctl.cluster.x-k8s.io"
	clusterctlNamespace = "capi-system"
	userClusterctl      = "clusterctl"
)

// TestMovePatchedCABPK moves a Cluster whose control plane CABPK built with
// docs/cabpk-minimal.patch initialised, with the real clusterctl move
// library (Cluster API v1.14.2's client.Move, run by hack/capi/move), from
// one management cluster of the stack to a second one that runs the same
// CABPK. Re-adoption after a restore is TestSeedWithPatchedCABPK/minimal's.
//
// clusterctl refuses to move a Cluster whose control plane is not
// initialised, so the Machine's Node registers first and core reports the
// control plane initialised. The lock is then still held: upstream, and the
// minimal patch alike, release it only on the join path.
//
// What the minimal patch's CABPK does with it, as measured: nothing.
// clusterctl moves the lock with its Cluster, since its ownerReference puts
// it in the Cluster's object graph, and creates it in the target with that
// ownerReference rebuilt for the moved Cluster's new UID (then patches its
// managed fields back, as it does for every object it creates); it deletes
// the lock from the source with the other moved objects. In the target the
// objects arrive without status (the LocalCluster and LocalMachine not
// provisioned, the KubeadmConfig naming no bootstrap data): once the
// infrastructure reports its objects provisioned again, CABPK restores the
// KubeadmConfig's status from the Machine's bootstrap data name, the branch
// in which the patch re-adopts the lock (Adopt); the lock is already owned
// by the moved Cluster's UID, so Adopt writes nothing, and CABPK makes no
// write to the lock in the target at all. Nor does it generate bootstrap data again: the Machine
// keeps the data it booted with, moved with its KubeadmConfig. Deleting the
// moved Cluster lets the garbage collector delete the lock.
//
// The test asserts exactly that: after the move, nothing of the Cluster's
// graph is left in the source, the lock among it, and clusterctl deleted
// it there; in the target the lock holds the same record, is owned by the
// moved Cluster's UID only and stays so once core reports the control
// plane initialised again; only clusterctl wrote it there; CABPK restored
// the KubeadmConfig's status and wrote neither the lock nor a Secret in the
// target; the KubeadmConfig names the same bootstrap data, unchanged; and
// the lock goes with the moved Cluster.
func TestMovePatchedCABPK(t *testing.T) {
	const patch = "docs/cabpk-minimal.patch"
	bin := cabpkBinary(t, "INITLOCK_CABPK_MINIMAL", patch)
	move := moveProgram(t)
	ctx := t.Context()
	from := startMgmt(t, stack.Options{Name: "move-source", S3: s3, CABPK: bin})
	prepareForClusterctl(t, from)
	to := startMgmt(t, stack.Options{Name: "move-target", S3: s3, CABPK: bin})
	prepareForClusterctl(t, to)

	const cluster, machine = "moved", "moved-cp-0"
	lockName := cluster + wire.LockSuffix
	ns := from.Env.Namespace(t)
	cleanupNode(t, from, ns, machine)
	must(t, from.CreateCluster(ctx, ns, cluster, stack.ClusterOptions{Workload: true}))
	must(t, from.CreateMachine(ctx, ns, cluster, machine, true))
	waitLockHeld(t, from, ns, cluster, machine)
	must(t, from.RegisterNode(ctx, ns, machine))
	waitInitialized(t, from, ns, cluster)
	// Move also wants every Machine's nodeRef.
	eventually(t, 60*time.Second, func(ctx context.Context) error { return hasNodeRef(ctx, from, ns, machine) })
	if err := lockOwned(ctx, from, ns, cluster); err != nil {
		t.Fatalf("before the move: %v", err)
	}
	srcLock, err := kubeenv.GetLock(ctx, from.Client, ns, cluster)
	must(t, err)
	srcCluster, err := from.Get(ctx, stack.ClusterGVK, ns, cluster)
	must(t, err)
	dataName, data := bootstrapData(t, from, ns, machine)

	moved := time.Now()
	moveNamespaceReal(t, move, from, to, ns)
	moveTook := time.Since(moved)

	// The source: nothing of the graph left, the lock deleted by clusterctl.
	left, err := from.Leftovers(ctx, ns)
	must(t, err)
	if len(left) > 0 {
		t.Errorf("left in the source after the move: %v", left)
	}
	if cm, err := kubeenv.GetLock(ctx, from.Client, ns, cluster); err != nil || cm != nil {
		t.Errorf("the lock in the source after the move: %v, %v; want none", cm, err)
	}
	var srcDeletes []string
	for _, w := range writesTo(t, from, ns, lockName) {
		if w.Verb == "delete" && w.Code < 300 {
			srcDeletes = append(srcDeletes, w.Resource) // writesTo puts the user there
		}
	}
	if len(srcDeletes) != 1 || srcDeletes[0] != userClusterctl {
		t.Errorf("the lock was deleted in the source by %v, want by %s once", srcDeletes, userClusterctl)
	}

	// The target: the objects arrive without status. The infrastructure
	// provider reports its objects provisioned again, as after a pivot;
	// until then CABPK cannot restore the KubeadmConfig's.
	for _, o := range []struct {
		gvk   schema.GroupVersionKind
		name  string
		field []string
	}{
		{stack.LocalClusterGVK, cluster, []string{"status", "initialization", "provisioned"}},
		{stack.LocalMachineGVK, machine, []string{"status", "initialization", "provisioned"}},
		{stack.KubeadmConfigGVK, machine, []string{"status", "dataSecretName"}},
	} {
		u, err := to.Get(ctx, o.gvk, ns, o.name)
		must(t, err)
		if u == nil {
			t.Fatalf("no %s %s/%s in the target after the move", o.gvk.Kind, ns, o.name)
		}
		if v, found, _ := unstructured.NestedFieldNoCopy(u.Object, o.field...); found {
			t.Errorf("%s %s/%s arrived in the target with %s = %v: clusterctl carries status now", o.gvk.Kind, ns, o.name, strings.Join(o.field, "."), v)
		}
	}
	markProvisioned(t, to, ns, cluster, machine)
	reinitialised := waitInitialized(t, to, ns, cluster)
	// CABPK has restored the KubeadmConfig's status: it went through the
	// branch where the patch re-adopts the lock.
	eventually(t, 60*time.Second, func(ctx context.Context) error {
		kc, err := to.Get(ctx, stack.KubeadmConfigGVK, ns, machine)
		if err != nil {
			return err
		}
		if kc == nil {
			return errors.New("no KubeadmConfig in the target")
		}
		created, _, _ := unstructured.NestedBool(kc.Object, "status", "initialization", "dataSecretCreated")
		if name, _, _ := unstructured.NestedString(kc.Object, "status", "dataSecretName"); !created || name == "" {
			return errors.New("CABPK has not restored the KubeadmConfig's status in the target yet")
		}
		return nil
	})
	dstCluster, err := to.Get(ctx, stack.ClusterGVK, ns, cluster)
	must(t, err)
	if dstCluster.GetUID() == srcCluster.GetUID() {
		t.Fatalf("the moved Cluster has the source's UID %s", dstCluster.GetUID())
	}
	const settle = 5 * time.Second
	kubeenv.Consistently(t, settle, func() error {
		if err := lockOwned(ctx, to, ns, cluster); err != nil {
			return fmt.Errorf("in the target: %w", err)
		}
		cm, err := kubeenv.GetLock(ctx, to.Client, ns, cluster)
		if err != nil {
			return err
		}
		if cm.Data[wire.DataKey] != srcLock.Data[wire.DataKey] {
			return fmt.Errorf("the lock in the target records %q, the source's %q", cm.Data[wire.DataKey], srcLock.Data[wire.DataKey])
		}
		return nil
	})
	// clusterctl creates each object, then patches its managed fields back
	// as they were in the source; nobody else writes the lock.
	dstLockWrites := writesTo(t, to, ns, lockName)
	var dstLockWriters []string
	for _, w := range dstLockWrites {
		dstLockWriters = append(dstLockWriters, w.Resource+" "+w.Verb)
	}
	if len(dstLockWrites) == 0 || dstLockWriters[0] != userClusterctl+" create" {
		t.Errorf("writes to the lock in the target: %v; want clusterctl's create first", dstLockWriters)
	}
	if slices.ContainsFunc(dstLockWrites, func(w stack.Write) bool { return w.Resource != userClusterctl }) {
		t.Errorf("writes to the lock in the target: %v; want clusterctl's only", dstLockWriters)
	}
	cabpkWrites := writesBy(t, to, userCABPK, ns, time.Time{})
	for _, w := range cabpkWrites {
		if w.Resource == "configmaps" || w.Resource == "secrets" {
			t.Errorf("CABPK wrote %s %s/%s in the target (%d)", w.Verb, w.Resource, w.Name, w.Code)
		}
	}
	if !slices.ContainsFunc(cabpkWrites, func(w stack.Write) bool {
		return w.Resource == "kubeadmconfigs" && w.Subresource == "status" && w.Name == machine && w.Code < 300
	}) {
		t.Errorf("CABPK did not write the KubeadmConfig's status in the target: %s", describeWrites(cabpkWrites))
	}
	if n, d := bootstrapData(t, to, ns, machine); n != dataName || d != data {
		t.Errorf("the Machine's bootstrap data in the target is %s (same content: %t), want %s as moved", n, d == data, dataName)
	}

	must(t, to.DeleteCluster(ctx, ns, cluster))
	eventually(t, 60*time.Second, func(ctx context.Context) error {
		cm, err := kubeenv.GetLock(ctx, to.Client, ns, cluster)
		if err != nil {
			return err
		}
		if cm != nil {
			return fmt.Errorf("the lock outlived the moved Cluster (owners %v)", cm.OwnerReferences)
		}
		return nil
	})
	if !slices.ContainsFunc(writesTo(t, to, ns, lockName), func(w stack.Write) bool {
		return w.Resource == userGC && w.Verb == "delete" && w.Code < 300
	}) {
		t.Errorf("the garbage collector did not delete the lock in the target: %v", writesTo(t, to, ns, lockName))
	}
	result(t, "CABPK with %s in both management clusters, clusterctl move %s: the lock moved with its Cluster, written in the target by clusterctl only (%s) owned by the moved Cluster's UID, and deleted by it in the source (nothing left there); "+
		"core reported the control plane initialised in the target %s after the infrastructure; CABPK restored the KubeadmConfig's status without a write to the lock or a Secret (%s), "+
		"the Machine kept its bootstrap data %s; the garbage collector deleted the lock with the moved Cluster",
		patch, moveTook.Round(time.Millisecond), strings.Join(dstLockWriters, ", "), reinitialised.Round(time.Millisecond), describeWrites(cabpkWrites), dataName)
}

// hasNodeRef tells whether core has set a Machine's status.nodeRef.
func hasNodeRef(ctx context.Context, m *stack.Mgmt, ns, machine string) error {
	u, err := m.Get(ctx, stack.MachineGVK, ns, machine)
	if err != nil {
		return err
	}
	if u == nil {
		return fmt.Errorf("no Machine %s/%s", ns, machine)
	}
	if name, _, _ := unstructured.NestedString(u.Object, "status", "nodeRef", "name"); name == "" {
		return fmt.Errorf("machine %s/%s has no nodeRef yet", ns, machine)
	}
	return nil
}

// bootstrapData returns the name of the Secret a Machine's KubeadmConfig
// names and its value.
func bootstrapData(t *testing.T, m *stack.Mgmt, ns, machine string) (string, string) {
	t.Helper()
	kc, err := m.Get(t.Context(), stack.KubeadmConfigGVK, ns, machine)
	must(t, err)
	if kc == nil {
		t.Fatalf("%s: no KubeadmConfig %s/%s", m.Name, ns, machine)
	}
	name, _, _ := unstructured.NestedString(kc.Object, "status", "dataSecretName")
	data, err := m.BootstrapData(t.Context(), ns, machine)
	must(t, err)
	if name == "" || data == "" {
		t.Fatalf("%s: KubeadmConfig %s/%s names no bootstrap data", m.Name, ns, machine)
	}
	return name, data
}

// prepareForClusterctl leaves in m what "clusterctl init" would and move
// relies on: the clusterctl label on the CRDs of the kinds to move (Cluster
// API's and the stack's infrastructure provider's; move discovers kinds
// from labelled CRDs only), clusterctl's inventory CRD, and the core
// provider in the inventory (move checks the target has every provider the
// source has).
func prepareForClusterctl(t *testing.T, m *stack.Mgmt) {
	t.Helper()
	ctx := t.Context()
	crds := &apiextensionsv1.CustomResourceDefinitionList{}
	must(t, m.Client.List(ctx, crds))
	labelled := 0
	for i := range crds.Items {
		crd := &crds.Items[i]
		g := crd.Spec.Group
		if g != stack.InfraGroup && (!strings.HasSuffix(g, "cluster.x-k8s.io") || g == clusterctlGroup) {
			continue
		}
		p := client.MergeFrom(crd.DeepCopy())
		if crd.Labels == nil {
			crd.Labels = map[string]string{}
		}
		crd.Labels[clusterctlLabel] = ""
		must(t, m.Client.Patch(ctx, crd, p))
		labelled++
	}
	if labelled == 0 {
		t.Fatalf("%s: no CRD to label for clusterctl", m.Name)
	}
	capiDir, err := kubeenv.ModuleDir("hack/capi", "sigs.k8s.io/cluster-api")
	must(t, err)
	objs, err := kubeenv.ReadObjects(filepath.Join(capiDir, "cmd", "clusterctl", "config", "manifest", "clusterctl-api.yaml"))
	must(t, err)
	for _, o := range objs {
		if err := m.Client.Create(ctx, o); err != nil && !apierrors.IsAlreadyExists(err) {
			t.Fatalf("%s: installing clusterctl's inventory: %v", m.Name, err)
		}
	}
	if err := m.Client.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: clusterctlNamespace}}); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
	p := &unstructured.Unstructured{}
	p.SetAPIVersion(clusterctlGroup + "/v1alpha3")
	p.SetKind("Provider")
	p.SetNamespace(clusterctlNamespace)
	p.SetName("cluster-api")
	p.SetLabels(map[string]string{clusterctlLabel: "", "cluster.x-k8s.io/provider": "cluster-api"})
	p.Object["providerName"] = "cluster-api"
	p.Object["type"] = "CoreProvider"
	p.Object["version"] = stack.CAPIVersion
	// The CRD serves once it is established.
	eventually(t, 30*time.Second, func(ctx context.Context) error {
		err := m.Client.Create(ctx, p.DeepCopy())
		if apierrors.IsAlreadyExists(err) {
			return nil
		}
		return err
	})
}

// moveProgram returns hack/capi/move, the clusterctl move library of
// Cluster API v1.14.2 built with the hack/capi module (its own dependency
// versions): $INITLOCK_MOVE (make test-e2e's INITLOCK_E2E_MOVE is the same
// program), or built here.
func moveProgram(t *testing.T) string {
	t.Helper()
	for _, env := range []string{"INITLOCK_MOVE", "INITLOCK_E2E_MOVE"} {
		if p := os.Getenv(env); p != "" {
			return p
		}
	}
	root, err := kubeenv.RepoRoot()
	must(t, err)
	out := filepath.Join(t.TempDir(), "move")
	cmd := exec.CommandContext(t.Context(), "go", "build", "-o", out, "./move")
	cmd.Dir = filepath.Join(root, "hack", "capi")
	cmd.Env = append(os.Environ(), "GOWORK=off")
	start := time.Now()
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("building hack/capi/move: %v\n%s", err, b)
	}
	t.Logf("built hack/capi/move in %s", time.Since(start).Round(time.Millisecond))
	return out
}

// moveNamespaceReal moves namespace ns from one management cluster to the
// other with the move program, as user clusterctl (system:masters) in
// both, with an empty home folder and no user configuration.
func moveNamespaceReal(t *testing.T, program string, from, to *stack.Mgmt, ns string) {
	t.Helper()
	fromCfg, err := from.Env.WriteKubeconfig(userClusterctl, []string{"system:masters"})
	must(t, err)
	toCfg, err := to.Env.WriteKubeconfig(userClusterctl, []string{"system:masters"})
	must(t, err)
	home := t.TempDir()
	var env []string
	for _, kv := range os.Environ() {
		name, _, _ := strings.Cut(kv, "=")
		if name == "KUBECONFIG" || name == "HOME" || strings.HasPrefix(name, "XDG_") || strings.HasPrefix(name, "CLUSTERCTL_") {
			continue
		}
		env = append(env, kv)
	}
	args := []string{"-from", fromCfg, "-to", toCfg, "-namespace", ns}
	t.Logf("$ clusterctl move --kubeconfig %s --to-kubeconfig %s --namespace %s   (hack/capi/move)", fromCfg, toCfg, ns)
	cmd := exec.CommandContext(t.Context(), program, args...)
	cmd.Env = append(env, "HOME="+home, "XDG_CONFIG_HOME="+filepath.Join(home, ".config"), "XDG_CACHE_HOME="+filepath.Join(home, ".cache"))
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("clusterctl move of namespace %s: %v\n%s", ns, err, stderr.String())
	}
	var res struct {
		Seconds float64 `json:"seconds"`
	}
	if err := json.Unmarshal(stdout.Bytes(), &res); err != nil {
		t.Fatalf("reading the result of clusterctl move: %v: %q", err, stdout.String())
	}
	t.Logf("clusterctl move of namespace %s: %.2fs in Move", ns, res.Seconds)
}
