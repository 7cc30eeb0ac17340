package stack

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	velerov1 "github.com/vmware-tanzu/velero/pkg/apis/velero/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/initlock/initlock/internal/kubeenv"
	"github.com/initlock/initlock/internal/kubeenv/velerosim"
	"github.com/initlock/initlock/internal/kubeenv/wire"
	"github.com/initlock/initlock/pkg/initlock/capi"
)

// WaitLockHeld waits until a Cluster's lock exists and names machine, as
// CABPK writes it when it grants the lock.
func (m *Mgmt) WaitLockHeld(ctx context.Context, ns, cluster, machine string) (*corev1.ConfigMap, error) {
	var cm *corev1.ConfigMap
	err := Poll(ctx, 2*time.Minute, func(ctx context.Context) error {
		var err error
		if cm, err = kubeenv.GetLock(ctx, m.Client, ns, cluster); err != nil {
			return err
		}
		if cm == nil {
			return errors.New("no lock yet")
		}
		rec, err := wire.DecodeRecord(cm.Data[wire.DataKey])
		if err != nil {
			return err
		}
		if rec.MachineName != machine {
			return fmt.Errorf("lock held by %q, want %q", rec.MachineName, machine)
		}
		return nil
	})
	return cm, err
}

// WaitCondition waits until core reports the condition True on the
// Cluster.
func (m *Mgmt) WaitCondition(ctx context.Context, ns, cluster, condType string) error {
	return Poll(ctx, 2*time.Minute, func(ctx context.Context) error {
		u, err := m.Get(ctx, ClusterGVK, ns, cluster)
		if err != nil {
			return err
		}
		if u == nil {
			return fmt.Errorf("cluster %s/%s does not exist", ns, cluster)
		}
		if condType == kubeenv.InitializedCondition && capi.IsControlPlaneInitialized(u) {
			return nil
		}
		conds, _, _ := unstructured.NestedSlice(u.Object, "status", "conditions")
		for _, c := range conds {
			if c, ok := c.(map[string]any); ok && c["type"] == condType && c["status"] == "True" {
				return nil
			}
		}
		return fmt.Errorf("cluster %s/%s is not %s yet", ns, cluster, condType)
	})
}

// Graph reads the objects of the graph kinds in namespace ns, as a backup
// of it holds them (velerosim.Backup: less those being deleted).
func (m *Mgmt) Graph(ctx context.Context, ns string) ([]*unstructured.Unstructured, error) {
	return velerosim.Backup(ctx, m.Client, ns, GraphKinds...)
}

// Unlinked returns, for each object of backed that had ownerReferences and
// still exists, what is missing now: an owner (by kind and name) without a
// reference to its current UID, or the annotation pending (the relinker's,
// which it removes once it has linked the object) still there.
func (m *Mgmt) Unlinked(ctx context.Context, ns string, backed []*unstructured.Unstructured, pending string) ([]string, error) {
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
			gv, err := schema.ParseGroupVersion(ref.APIVersion)
			if err != nil {
				return nil, err
			}
			owner, err := m.Get(ctx, gv.WithKind(ref.Kind), ns, ref.Name)
			if err != nil {
				return nil, err
			}
			if owner == nil || !slices.ContainsFunc(cur.GetOwnerReferences(), func(r metav1.OwnerReference) bool {
				return r.Kind == ref.Kind && r.Name == ref.Name && r.UID == owner.GetUID()
			}) {
				out = append(out, Key(b)+" -> "+ref.Kind+"/"+ref.Name)
			}
		}
		if _, ok := cur.GetAnnotations()[pending]; ok {
			out = append(out, Key(b)+" annotated")
		}
	}
	return out, nil
}

// Key names an object as Kind/name.
func Key(u *unstructured.Unstructured) string { return u.GetKind() + "/" + u.GetName() }

// Leftovers lists, as Kind/name, the objects of the graph kinds in ns,
// those being deleted included.
func (m *Mgmt) Leftovers(ctx context.Context, ns string) ([]string, error) {
	objs, err := velerosim.List(ctx, m.Client, ns, GraphKinds...)
	if err != nil {
		return nil, err
	}
	out := make([]string, 0, len(objs))
	for _, o := range objs {
		out = append(out, Key(o))
	}
	slices.Sort(out)
	return out, nil
}

// DeleteCluster deletes a Cluster and waits until core has deleted its
// Machines and let it go.
func (m *Mgmt) DeleteCluster(ctx context.Context, ns, name string) error {
	u, err := m.Get(ctx, ClusterGVK, ns, name)
	if err != nil {
		return err
	}
	if u == nil {
		return fmt.Errorf("cluster %s/%s does not exist", ns, name)
	}
	if err := m.Client.Delete(ctx, u); err != nil {
		return fmt.Errorf("deleting cluster %s/%s: %w", ns, name, err)
	}
	return Poll(ctx, 2*time.Minute, func(ctx context.Context) error {
		u, err := m.Get(ctx, ClusterGVK, ns, name)
		if err != nil {
			return err
		}
		if u != nil {
			return fmt.Errorf("cluster %s/%s still exists (finalizers %v)", ns, name, u.GetFinalizers())
		}
		return nil
	})
}

// DeleteNamespace deletes a namespace and waits until it is gone.
func (m *Mgmt) DeleteNamespace(ctx context.Context, ns string) error {
	n := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}
	if err := m.Client.Delete(ctx, n); err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("deleting namespace %s: %w", ns, err)
	}
	return Poll(ctx, 3*time.Minute, func(ctx context.Context) error {
		err := m.Client.Get(ctx, client.ObjectKey{Name: ns}, n)
		if apierrors.IsNotFound(err) {
			return nil
		}
		if err != nil {
			return err
		}
		left, _ := m.Leftovers(ctx, ns)
		return fmt.Errorf("namespace %s is %s; left: %v", ns, n.Status.Phase, left)
	})
}

// BackupNamespace runs "velero backup create NAME --include-namespaces NS
// --wait" and checks that the Backup completed.
func (v *Velero) BackupNamespace(ctx context.Context, name, ns string) error {
	if _, err := v.CLI(ctx, BackupArgs(name, ns)...); err != nil {
		return err
	}
	b, err := v.Backup(ctx, name)
	if err != nil {
		return err
	}
	if b.Status.Phase != velerov1.BackupPhaseCompleted {
		out, _ := v.CLI(ctx, "backup", "describe", name, "--details")
		return fmt.Errorf("backup %s is %s:\n%s", name, b.Status.Phase, out)
	}
	return nil
}

// BackupArgs are the velero CLI's arguments that back up namespace ns.
func BackupArgs(name, ns string) []string {
	return []string{"backup", "create", name, "--include-namespaces", ns, "--wait"}
}

// RestoreArgs are the velero CLI's arguments that restore backup, with
// extra arguments such as --namespace-mappings.
func RestoreArgs(name, backup string, extra ...string) []string {
	return append([]string{"restore", "create", name, "--from-backup", backup, "--wait"}, extra...)
}

// RestoreBackup runs "velero restore create NAME --from-backup BACKUP
// --wait" with extra arguments and checks that the Restore completed.
func (v *Velero) RestoreBackup(ctx context.Context, name, backup string, extra ...string) error {
	if _, err := v.CLI(ctx, RestoreArgs(name, backup, extra...)...); err != nil {
		return err
	}
	r, err := v.Restore(ctx, name)
	if err != nil {
		return err
	}
	if r.Status.Phase != velerov1.RestorePhaseCompleted {
		out, _ := v.CLI(ctx, "restore", "describe", name, "--details")
		return fmt.Errorf("restore %s is %s (%s%v):\n%s", name, r.Status.Phase, r.Status.FailureReason, r.Status.ValidationErrors, out)
	}
	return nil
}
