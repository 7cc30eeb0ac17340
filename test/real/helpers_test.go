//go:build real

package real_test

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	velerov1 "github.com/vmware-tanzu/velero/pkg/apis/velero/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/initlock/initlock/internal/kubeenv/stack"
	"github.com/initlock/initlock/internal/kubeenv/velerosim"
	"github.com/initlock/initlock/internal/relink"
	"github.com/initlock/initlock/pkg/initlock"
)

// Users the API server's audit log names the components by.
const (
	userCABPK   = "capi-kubeadm-bootstrap-manager"
	userCore    = "capi-manager"
	userManager = stack.ManagerUser
)

// suffix returns a short random suffix for names shared through the bucket.
func suffix() string {
	b := make([]byte, 3)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// eventually is kubeenv.Eventually with stack.Poll's context.
func eventually(t *testing.T, timeout time.Duration, f func(context.Context) error) {
	t.Helper()
	if err := stack.Poll(t.Context(), timeout, f); err != nil {
		t.Fatal(err)
	}
}

// waitLockHeld waits until the Cluster's lock exists and names machine.
func waitLockHeld(t *testing.T, m *stack.Mgmt, ns, cluster, machine string) *corev1.ConfigMap {
	t.Helper()
	var cm *corev1.ConfigMap
	eventually(t, 60*time.Second, func(ctx context.Context) error {
		var err error
		if cm, err = m.Lock(ctx, ns, cluster); err != nil {
			return err
		}
		if cm == nil {
			return errors.New("no lock yet")
		}
		rec, err := initlock.DecodeRecord(cm.Data[initlock.DataKey])
		if err != nil {
			return err
		}
		if rec.MachineName != machine {
			return fmt.Errorf("lock held by %q, want %q", rec.MachineName, machine)
		}
		return nil
	})
	return cm
}

// waitPaused waits until core reports the Cluster paused, so that nothing
// of its graph changes any more.
func waitPaused(t *testing.T, m *stack.Mgmt, ns, cluster string) {
	t.Helper()
	eventually(t, 30*time.Second, func(ctx context.Context) error {
		u, err := m.Get(ctx, stack.ClusterGVK, ns, cluster)
		if err != nil || u == nil {
			return fmt.Errorf("cluster %s: %v", cluster, err)
		}
		if !conditionTrue(u, "Paused") {
			return errors.New("core does not report the Cluster paused yet")
		}
		return nil
	})
}

func conditionTrue(u *unstructured.Unstructured, condType string) bool {
	conds, _, _ := unstructured.NestedSlice(u.Object, "status", "conditions")
	for _, c := range conds {
		if m, ok := c.(map[string]any); ok && m["type"] == condType && m["status"] == "True" {
			return true
		}
	}
	return false
}

// snapshot reads the Cluster graph of namespace ns.
func snapshot(t *testing.T, m *stack.Mgmt, ns string) []*unstructured.Unstructured {
	t.Helper()
	objs, err := velerosim.Backup(t.Context(), m.Client, ns, stack.GraphKinds...)
	must(t, err)
	return objs
}

func key(u *unstructured.Unstructured) string { return u.GetKind() + "/" + u.GetName() }

// unlinked returns, for each object of backed that had ownerReferences,
// what is missing now: an owner (by kind and name) without a reference to
// its current UID, or the relinker's annotation still present. Objects gone
// since are skipped.
func unlinked(ctx context.Context, m *stack.Mgmt, ns string, backed []*unstructured.Unstructured) ([]string, error) {
	var out []string
	for _, b := range backed {
		if len(b.GetOwnerReferences()) == 0 {
			continue
		}
		cur, err := m.Get(ctx, b.GroupVersionKind(), ns, b.GetName())
		if err != nil {
			return nil, err
		}
		if cur == nil {
			continue
		}
		for _, ref := range b.GetOwnerReferences() {
			owner, err := m.Get(ctx, refGVK(ref), ns, ref.Name)
			if err != nil {
				return nil, err
			}
			if owner == nil || !slices.ContainsFunc(cur.GetOwnerReferences(), func(r metav1.OwnerReference) bool {
				return r.Kind == ref.Kind && r.Name == ref.Name && r.UID == owner.GetUID()
			}) {
				out = append(out, key(b)+" -> "+ref.Kind+"/"+ref.Name)
			}
		}
		if _, ok := cur.GetAnnotations()[relink.Annotation]; ok {
			out = append(out, key(b)+" annotated")
		}
	}
	return out, nil
}

func refGVK(ref metav1.OwnerReference) schema.GroupVersionKind {
	gv, _ := schema.ParseGroupVersion(ref.APIVersion)
	return gv.WithKind(ref.Kind)
}

// leftovers lists the objects of the graph kinds left in namespace ns.
func leftovers(ctx context.Context, m *stack.Mgmt, ns string) ([]string, error) {
	objs, err := velerosim.Backup(ctx, m.Client, ns, stack.GraphKinds...)
	if err != nil {
		return nil, err
	}
	out := make([]string, 0, len(objs))
	for _, o := range objs {
		out = append(out, key(o))
	}
	slices.Sort(out)
	return out, nil
}

// deleteCluster deletes a Cluster and waits until core has deleted its
// Machines and let it go.
func deleteCluster(t *testing.T, m *stack.Mgmt, ns, name string) {
	t.Helper()
	u, err := m.Get(t.Context(), stack.ClusterGVK, ns, name)
	must(t, err)
	if u == nil {
		t.Fatalf("cluster %s/%s does not exist", ns, name)
	}
	must(t, m.Client.Delete(t.Context(), u))
	eventually(t, 2*time.Minute, func(ctx context.Context) error {
		u, err := m.Get(ctx, stack.ClusterGVK, ns, name)
		if err != nil {
			return err
		}
		if u != nil {
			return fmt.Errorf("cluster %s/%s still exists (finalizers %v)", ns, name, u.GetFinalizers())
		}
		return nil
	})
}

// deleteNamespace deletes a namespace and waits until it is gone.
func deleteNamespace(t *testing.T, m *stack.Mgmt, ns string) {
	t.Helper()
	n := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}
	if err := m.Client.Delete(t.Context(), n); err != nil && !apierrors.IsNotFound(err) {
		t.Fatal(err)
	}
	eventually(t, 3*time.Minute, func(ctx context.Context) error {
		err := m.Client.Get(ctx, client.ObjectKey{Name: ns}, n)
		if apierrors.IsNotFound(err) {
			return nil
		}
		if err != nil {
			return err
		}
		left, _ := leftovers(ctx, m, ns)
		return fmt.Errorf("namespace %s is %s; left: %v", ns, n.Status.Phase, left)
	})
}

// cleanupNamespace deletes ns when t ends, without waiting.
func cleanupNamespace(t *testing.T, m *stack.Mgmt, ns string) {
	t.Cleanup(func() {
		_ = m.Client.Delete(context.Background(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}})
	})
}

// velero runs the velero CLI against m's server, logging the command as a
// user would type it.
func veleroCLI(t *testing.T, v *stack.Velero, args ...string) string {
	t.Helper()
	t.Logf("$ velero %s", strings.Join(args, " "))
	out, err := v.CLI(t.Context(), args...)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// backupNamespace backs ns up with the real Velero server and returns the
// Backup's name.
func backupNamespace(t *testing.T, v *stack.Velero, ns string) string {
	t.Helper()
	name := "b-" + suffix()
	veleroCLI(t, v, "backup", "create", name, "--include-namespaces", ns, "--wait")
	b, err := v.Backup(t.Context(), name)
	must(t, err)
	if b.Status.Phase != velerov1.BackupPhaseCompleted {
		t.Fatalf("backup %s is %s: %s", name, b.Status.Phase, veleroCLI(t, v, "backup", "describe", name, "--details"))
	}
	return name
}

// restoreBackup restores a backup with the real Velero server, with the
// velero CLI's extra arguments, and returns when the Restore is done.
func restoreBackup(t *testing.T, v *stack.Velero, backup string, args ...string) (name string, done time.Time) {
	t.Helper()
	name = "r-" + suffix()
	veleroCLI(t, v, append([]string{"restore", "create", name, "--from-backup", backup, "--wait"}, args...)...)
	done = time.Now()
	r, err := v.Restore(t.Context(), name)
	must(t, err)
	if r.Status.Phase != velerov1.RestorePhaseCompleted {
		out, _ := v.CLI(t.Context(), "restore", "logs", name)
		t.Fatalf("restore %s is %s (%d errors, %d warnings):\n%s", name, r.Status.Phase, r.Status.Errors, r.Status.Warnings, out)
	}
	return name, done
}

// writesBy returns the writes of user in namespace ns, from the audit log.
func writesBy(t *testing.T, m *stack.Mgmt, user, ns string, since time.Time) []stack.Write {
	t.Helper()
	all, err := m.Writes()
	must(t, err)
	var out []stack.Write
	for _, w := range all {
		if w.User == user && w.Namespace == ns && !w.At.Before(since) {
			out = append(out, w)
		}
	}
	return out
}

func describeWrites(ws []stack.Write) string {
	counts := map[string]int{}
	for _, w := range ws {
		r := w.Resource
		if w.Subresource != "" {
			r += "/" + w.Subresource
		}
		counts[w.Verb+" "+r]++
	}
	var parts []string
	for k, n := range counts {
		parts = append(parts, fmt.Sprintf("%d %s", n, k))
	}
	slices.Sort(parts)
	return strings.Join(parts, ", ")
}

func keyOf(ns, name string) client.ObjectKey { return client.ObjectKey{Namespace: ns, Name: name} }
