//go:build real

package real_test

import (
	"archive/tar"
	"compress/gzip"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	riav2 "github.com/vmware-tanzu/velero/pkg/plugin/velero/restoreitemaction/v2"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/initlock/initlock/internal/kubeenv/stack"
	"github.com/initlock/initlock/internal/kubeenv/velerosim"
	"github.com/initlock/initlock/internal/kubeenv/wire"
	"github.com/initlock/initlock/internal/velero"
)

// deletingName is the ConfigMap of fidelityGraph that is being deleted when
// the backup is taken.
const deletingName = "b-deleting"

// fidelityGraph creates, in ns, a paused Cluster's graph with what a
// restore may treat differently: ownerReferences (controller and not),
// status, labels, annotations, a finalizer, Secrets and ConfigMaps; and
// what a backup may treat differently: a ConfigMap being deleted, held
// back by a finalizer.
func fidelityGraph(t *testing.T, ns string) {
	t.Helper()
	ctx := t.Context()
	c := source.Client
	const name = "fid"
	must(t, source.CreateCluster(ctx, ns, name, stack.ClusterOptions{}))
	setPaused(t, source, ns, name, true)
	cluster, err := source.Get(ctx, stack.ClusterGVK, ns, name)
	must(t, err)
	owner := metav1.OwnerReference{APIVersion: cluster.GetAPIVersion(), Kind: "Cluster", Name: name, UID: cluster.GetUID()}
	ctrlOwner := owner
	ctrlOwner.Controller, ctrlOwner.BlockOwnerDeletion = ptr.To(true), ptr.To(true)
	labels := map[string]string{"cluster.x-k8s.io/cluster-name": name, "app": "fidelity"}
	for _, o := range []client.Object{
		&corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name + wire.LockSuffix, Labels: labels,
			OwnerReferences: []metav1.OwnerReference{owner}}, Data: map[string]string{wire.DataKey: `{"machineName":"fid-cp-0"}`}},
		&corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "a-plain", Annotations: map[string]string{"note": "kept"},
			Finalizers: []string{"initlock.dev/fidelity"}}, Data: map[string]string{"k": "v"}},
		&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name + "-ca", Labels: labels,
			OwnerReferences: []metav1.OwnerReference{ctrlOwner}}, Type: "cluster.x-k8s.io/secret", Data: map[string][]byte{"tls.crt": []byte("x")}},
	} {
		must(t, c.Create(ctx, o))
	}
	// An object being deleted when the backup is taken: Velero skips it.
	deleting := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: deletingName,
		Finalizers: []string{"initlock.dev/fidelity"}}, Data: map[string]string{"k": "v"}}
	must(t, c.Create(ctx, deleting))
	must(t, c.Delete(ctx, deleting))
	t.Cleanup(func() {
		ctx := context.WithoutCancel(t.Context())
		removeFinalizers(ctx, source, ns, deletingName)
		removeFinalizers(ctx, source, ns, "a-plain")
		// The restored copies of the fidelity scenario (ns-real-0, ns-sim-0, ...).
		for _, copyNS := range []string{ns + "-real-0", ns + "-sim-0", ns + "-real-1", ns + "-sim-1"} {
			removeFinalizers(ctx, source, copyNS, "a-plain")
		}
	})
	for _, m := range []string{"fid-cp-0", "fid-cp-1"} {
		must(t, source.CreateMachine(ctx, ns, name, m, true))
		// The ownerReferences core would have written, had the Cluster
		// not been paused.
		mach := setOwners(t, stack.MachineGVK, ns, m, owner)
		setOwners(t, stack.KubeadmConfigGVK, ns, m, metav1.OwnerReference{APIVersion: mach.GetAPIVersion(), Kind: "Machine",
			Name: m, UID: mach.GetUID(), Controller: ptr.To(true), BlockOwnerDeletion: ptr.To(true)})
	}
	setOwners(t, stack.LocalClusterGVK, ns, name, owner)
}

// setOwners sets an object's ownerReferences with a merge patch.
func setOwners(t *testing.T, gvk schema.GroupVersionKind, ns, name string, refs ...metav1.OwnerReference) *unstructured.Unstructured {
	t.Helper()
	body, err := json.Marshal(map[string]any{"metadata": map[string]any{"ownerReferences": refs}})
	must(t, err)
	u := &unstructured.Unstructured{}
	u.SetGroupVersionKind(gvk)
	u.SetNamespace(ns)
	u.SetName(name)
	must(t, source.Client.Patch(t.Context(), u, client.RawPatch(types.MergePatchType, body)))
	return u
}

func removeFinalizers(ctx context.Context, m *stack.Mgmt, ns, name string) {
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}}
	_ = m.Client.Patch(ctx, cm, client.RawPatch(types.MergePatchType, []byte(`{"metadata":{"finalizers":null}}`)))
}

// keys names objects as Kind/name, sorted.
func keys(objs []*unstructured.Unstructured) []string {
	out := make([]string, 0, len(objs))
	for _, u := range objs {
		out = append(out, stack.Key(u))
	}
	slices.Sort(out)
	return out
}

// comparable is an object with what always differs between two restores
// removed: its identity and timestamps, and the times in managedFields.
func comparable(u *unstructured.Unstructured) map[string]any {
	c := u.DeepCopy()
	for _, f := range []string{"uid", "resourceVersion", "creationTimestamp", "generation", "namespace"} {
		unstructured.RemoveNestedField(c.Object, "metadata", f)
	}
	mf := c.GetManagedFields()
	for i := range mf {
		mf[i].Time = nil
	}
	c.SetManagedFields(mf)
	// Condition times differ from run to run.
	if conds, ok, _ := unstructured.NestedSlice(c.Object, "status", "conditions"); ok {
		for _, cd := range conds {
			if m, ok := cd.(map[string]any); ok {
				delete(m, "lastTransitionTime")
			}
		}
		_ = unstructured.SetNestedSlice(c.Object, conds, "status", "conditions")
	}
	return c.Object
}

// diffPaths lists the leaf paths where a and b differ.
func diffPaths(prefix string, a, b any) []string {
	am, aok := a.(map[string]any)
	bm, bok := b.(map[string]any)
	if aok && bok {
		var out []string
		keys := map[string]bool{}
		for k := range am {
			keys[k] = true
		}
		for k := range bm {
			keys[k] = true
		}
		for k := range keys {
			out = append(out, diffPaths(prefix+"."+k, am[k], bm[k])...)
		}
		return out
	}
	ja, _ := json.Marshal(a)
	jb, _ := json.Marshal(b)
	if string(ja) != string(jb) {
		return []string{fmt.Sprintf("%s: velero %s, simulator %s", prefix, ja, jb)}
	}
	return nil
}

// createOrder returns the objects of the graph kinds created in ns by user,
// in the order the API server answered.
func createOrder(t *testing.T, m *stack.Mgmt, user, ns string) []string {
	t.Helper()
	kinds := map[string]string{"configmaps": "ConfigMap", "secrets": "Secret", "clusters": "Cluster", "machines": "Machine",
		"kubeadmconfigs": "KubeadmConfig", "localclusters": "LocalCluster", "localmachines": "LocalMachine"}
	var out []string
	for _, w := range auditWrites(t, m, func(w stack.Write) bool {
		return w.User == user && w.Namespace == ns && w.Verb == "create" && w.Code < 300 && kinds[w.Resource] != ""
	}) {
		out = append(out, kinds[w.Resource]+"/"+w.Name)
	}
	return out
}

// downloadBackup downloads a backup's tarball from the bucket with the
// velero CLI and returns the objects of the graph kinds it holds for
// namespace ns, as Velero stored them (in the preferred version).
func downloadBackup(t *testing.T, v *stack.Velero, backup, ns string) []*unstructured.Unstructured {
	t.Helper()
	file := filepath.Join(t.TempDir(), backup+".tar.gz")
	veleroCLI(t, v, "backup", "download", backup, "-o", file)
	f, err := os.Open(file)
	must(t, err)
	defer func() { _ = f.Close() }()
	gz, err := gzip.NewReader(f)
	must(t, err)
	kinds := map[string]bool{}
	for _, k := range stack.GraphKinds {
		kinds[k.Kind] = true
	}
	var out []*unstructured.Unstructured
	tr := tar.NewReader(gz)
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		must(t, err)
		// resources/<resource>/namespaces/<ns>/<name>.json; the copies
		// under <resource>/<version>-preferredversion/ are the same.
		parts := strings.Split(h.Name, "/")
		if len(parts) != 5 || parts[0] != "resources" || parts[2] != "namespaces" || parts[3] != ns {
			continue
		}
		b, err := io.ReadAll(tr)
		must(t, err)
		u := &unstructured.Unstructured{}
		must(t, u.UnmarshalJSON(b))
		if kinds[u.GetKind()] && (u.GetKind() != "ConfigMap" || u.GetName() != "kube-root-ca.crt") {
			out = append(out, u)
		}
	}
	return out
}

// compareRestores compares each object of backed as restored into realNS
// by Velero and into simNS by the simulator, and counts the infrastructure
// objects whose status Velero restored. CAPI core reports the restored
// objects paused a moment after their creation: it compares again until
// both restores have settled, for 15 s at most.
func compareRestores(t *testing.T, backed []*unstructured.Unstructured, realNS, simNS string) (diffs []string, statuses int) {
	t.Helper()
	_ = stack.Poll(t.Context(), 15*time.Second, func(context.Context) error {
		diffs, statuses = nil, 0
		for _, b := range backed {
			got, err := source.Get(t.Context(), b.GroupVersionKind(), realNS, b.GetName())
			must(t, err)
			sim, err := source.Get(t.Context(), b.GroupVersionKind(), simNS, b.GetName())
			must(t, err)
			if got == nil || sim == nil {
				diffs = append(diffs, fmt.Sprintf("%s: restored by velero %t, by the simulator %t", stack.Key(b), got != nil, sim != nil))
				continue
			}
			if _, ok := got.Object["status"]; ok && strings.HasPrefix(got.GetAPIVersion(), stack.InfraGroup) {
				statuses++
			}
			for _, d := range diffPaths("", comparable(got), comparable(sim)) {
				diffs = append(diffs, stack.Key(b)+d)
			}
		}
		if len(diffs) > 0 {
			return fmt.Errorf("%d differences", len(diffs))
		}
		return nil
	})
	return diffs, statuses
}

// simRestore restores backed with velerosim as simCfg's user, with opts and
// initlock's two restore item actions.
func simRestore(t *testing.T, simCfg *rest.Config, opts velerosim.Options, backed []*unstructured.Unstructured) {
	t.Helper()
	cfg := velero.DefaultConfig()
	opts.Actions = []riav2.RestoreItemAction{velero.NewAction(cfg, false, nil), velero.NewAction(cfg, true, nil)}
	r, err := velerosim.New(simCfg, opts)
	must(t, err)
	_, err = r.Restore(t.Context(), backed)
	must(t, err)
}

// TestSimulatorFidelity backs up and restores the same objects with the real
// Velero server (and initlock's plugin) and with velerosim, and compares the
// two restores object by object: every field, the labels and annotations
// added, ownerReferences, status, and the order of creation; and what each
// backed up (neither holds an object being deleted). The differences
// velerosim's doc lists are allowed; any other fails the test.
func TestSimulatorFidelity(t *testing.T) {
	ctx := t.Context()
	ns := source.Env.Namespace(t)
	fidelityGraph(t, ns)
	v := startVelero(t, source, true)
	backup := backupNamespace(t, v, ns)
	// The simulator backs up what Velero backed up: not the object being
	// deleted.
	backed := downloadBackup(t, v, backup, ns)
	simBacked, err := velerosim.Backup(ctx, source.Client, ns, stack.GraphKinds...)
	must(t, err)
	realKeys, simKeys := keys(backed), keys(simBacked)
	if !slices.Equal(realKeys, simKeys) {
		t.Errorf("backed up: velero %v, simulator %v", realKeys, simKeys)
	}
	if slices.Contains(realKeys, "ConfigMap/"+deletingName) {
		t.Errorf("velero backed up %s, which is being deleted", deletingName)
	}
	// The simulator restores exactly what Velero backed up.
	simCfg, err := source.Env.AddUser("velerosim", []string{"system:masters"})
	must(t, err)

	// Once as the seed does it, once with the infrastructure's status.
	withStatus := []string{"localclusters." + stack.InfraGroup, "localmachines." + stack.InfraGroup}
	var lines []string
	var total int
	for i, status := range [][]string{nil, withStatus} {
		realNS, simNS := fmt.Sprintf("%s-real-%d", ns, i), fmt.Sprintf("%s-sim-%d", ns, i)
		cleanupNamespace(t, source, realNS)
		cleanupNamespace(t, source, simNS)
		args := []string{"--namespace-mappings", ns + ":" + realNS}
		if status != nil {
			args = append(args, "--status-include-resources", strings.Join(status, ","))
		}
		restore, _ := restoreBackup(t, v, backup, args...)

		must(t, source.Client.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: simNS}}))
		simRestore(t, simCfg, velerosim.Options{NamespaceMapping: map[string]string{ns: simNS},
			BackupName: backup, RestoreName: restore, StatusResources: status}, backed)
		diffs, statuses := compareRestores(t, backed, realNS, simNS)
		if status != nil && statuses != 3 {
			t.Errorf("velero restored the status of %d infrastructure objects, want 3", statuses)
		}
		realOrder := createOrder(t, source, "velero", realNS)
		simOrder := createOrder(t, source, "velerosim", simNS)
		if !slices.Equal(realOrder, simOrder) {
			diffs = append(diffs, fmt.Sprintf("order: velero %v, simulator %v", realOrder, simOrder))
		}
		slices.Sort(diffs)
		for _, d := range diffs {
			t.Errorf("difference (status of %v): %s", status, d)
		}
		total += len(diffs)
		if i == 0 {
			lines = append(lines, fmt.Sprintf("%d objects backed up by both (not %s, being deleted), restored by both in the order %s: %d differences",
				len(backed), deletingName, strings.Join(realOrder, " "), len(diffs)))
		} else {
			lines = append(lines, fmt.Sprintf("with --status-include-resources %s (%d statuses restored): %d differences", strings.Join(status, ","), statuses, len(diffs)))
		}
	}
	n, line := compareUpdates(t, v, backup, backed, ns+"-real-0", ns+"-sim-0", simCfg)
	total += n
	lines = append(lines, line)
	source.StopVelero()
	result(t, "fidelity of velerosim against Velero %s: %s; %d differences in all", stack.VeleroVersion, strings.Join(lines, "; "), total)
}
