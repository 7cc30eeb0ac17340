package chaos

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/initlock/initlock/internal/kubeenv"
	"github.com/initlock/initlock/pkg/initlock/capi"
)

// setup plants the ConfigMaps that are not locks and creates the Clusters,
// their add-on ConfigMaps, their Machines and their upstream locks.
func (r *runner) setup(ctx context.Context) error {
	foreign := []*corev1.ConfigMap{
		{ObjectMeta: metav1.ObjectMeta{Name: "app-settings"}, Data: map[string]string{"color": "blue"}},
		{ObjectMeta: metav1.ObjectMeta{Name: "ghost-lock", Labels: map[string]string{capi.ClusterNameLabel: "ghost"}},
			Data: map[string]string{"note": "labelled like a lock, has no lock record"}},
		{ObjectMeta: metav1.ObjectMeta{Name: r.p.Clusters[0].Name + "-kubeadm-config", Labels: map[string]string{capi.ClusterNameLabel: r.p.Clusters[0].Name}},
			Data: map[string]string{"ClusterConfiguration": "kind: ClusterConfiguration"}},
	}
	for _, cp := range r.p.Clusters {
		// A lock of the upstream format, less what makes it one.
		cm := kubeenv.NewLock(r.ns, cp.Name, cp.Machines[0], nil)
		switch cp.Foreign {
		case ForeignUnlabelled:
			cm.Labels = nil
		case ForeignNoKey:
			cm.Data = map[string]string{"owner": "someone else"}
		case ForeignOtherCluster:
			cm.Labels[capi.ClusterNameLabel] = "other"
		default:
			continue
		}
		foreign = append(foreign, cm)
	}
	for _, cm := range foreign {
		cm.Namespace = r.ns
		if err := r.admin.Create(ctx, cm); err != nil {
			return fmt.Errorf("planting configmap %s: %w", cm.Name, err)
		}
		r.c.PlantForeign(ForeignConfigMap{Name: cm.Name, UID: string(cm.UID), ResourceVersion: cm.ResourceVersion, Checksum: checksum(cm)})
		r.h.Add("driver", "planted", cm.Name, cm.ResourceVersion, "a configmap that is not a lock")
	}
	for _, cp := range r.p.Clusters {
		u := kubeenv.NewCluster(capi.V1Beta2, r.ns, cp.Name)
		if cp.Finalizer {
			u.SetFinalizers([]string{finalizer})
		}
		if err := r.admin.Create(ctx, u); err != nil {
			return fmt.Errorf("creating cluster %s: %w", cp.Name, err)
		}
		r.c.ClusterCreated(cp.Name, u.GetUID(), nil)
		r.snapshots[cp.Name] = u.DeepCopy()
		if err := r.admin.Create(ctx, newAddOn(r.ns, u)); err != nil {
			return fmt.Errorf("creating the add-on of %s: %w", cp.Name, err)
		}
		for _, m := range cp.Machines {
			if err := r.createMachine(ctx, cp.Name, m); err != nil {
				return err
			}
		}
		if cp.UpstreamLock {
			if err := r.admin.Create(ctx, kubeenv.NewLock(r.ns, cp.Name, cp.Machines[0], u)); err != nil {
				return fmt.Errorf("creating the upstream lock of %s: %w", cp.Name, err)
			}
		}
		if cp.Initialized {
			r.c.MarkInitialized(cp.Name)
			if err := r.setStatusInitialized(ctx, cp.Name); err != nil {
				return err
			}
		} else if cp.UpstreamLock {
			r.c.UpstreamHold(cp.Name, cp.Machines[0])
		}
	}
	return nil
}

// createMachine creates a control-plane Machine of cluster and records its
// UID.
func (r *runner) createMachine(ctx context.Context, cluster, name string) error {
	m := kubeenv.NewMachine(capi.V1Beta2, r.ns, cluster, name)
	if err := r.admin.Create(ctx, m); err != nil {
		return fmt.Errorf("creating machine %s: %w", name, err)
	}
	r.c.MachineCreated(name, m.GetUID())
	return nil
}
