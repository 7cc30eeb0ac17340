package chaos

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"sort"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/initlock/initlock/internal/kubeenv"
	"github.com/initlock/initlock/internal/kubeenv/wire"
	"github.com/initlock/initlock/pkg/initlock/capi"
)

// settle ends the faults, unpauses every Cluster, lets every replica run and
// waits for invariant 2 and for the restored add-ons to be linked
// (invariant 5).
func (r *runner) settle(ctx context.Context) error {
	r.proxy.SetFaults(Faults{})
	r.h.Add("driver", "settling", "", "", "faults off, clusters unpaused, every replica running")
	for _, inj := range r.injectors {
		inj.WaitLate()
	}
	r.proxy.WaitLate()
	r.h.Add("driver", "late writes sent", "", "", "every held write has reached the server")
	for _, crt := range r.clusters {
		if crt.isGone() {
			continue
		}
		name := crt.plan.Name
		if err := r.setPaused(ctx, name, false); err != nil {
			return err
		}
		if r.c.Initialized(name) {
			if err := r.setStatusInitialized(ctx, name); err != nil {
				return err
			}
		}
	}
	start := time.Now()
	deadline := start.Add(r.o.SettleTimeout)
	for {
		problems, err := r.unsettled(ctx)
		if err != nil {
			return err
		}
		unlinked, err := r.unlinkedAddOns(ctx)
		if err != nil {
			return err
		}
		if len(problems)+len(unlinked) == 0 {
			r.res.Settle = time.Since(start)
			r.h.Addf("driver", "settled", "", "after %s", r.res.Settle.Round(time.Millisecond))
			return nil
		}
		if time.Now().After(deadline) {
			for _, p := range problems {
				r.c.Violate(InvSettled, "%s %s after settling", p, r.o.SettleTimeout)
			}
			for _, p := range unlinked {
				r.c.Violate(InvRightOwner, "%s %s after settling", p, r.o.SettleTimeout)
			}
			return nil
		}
		if !sleep(ctx, 200*time.Millisecond) {
			return ctx.Err()
		}
	}
}

// unsettled lists the locks that break invariant 2 now.
func (r *runner) unsettled(ctx context.Context) ([]string, error) {
	cms := &corev1.ConfigMapList{}
	if err := r.admin.List(ctx, cms, client.InNamespace(r.ns)); err != nil {
		return nil, err
	}
	clusters := &unstructured.UnstructuredList{}
	clusters.SetGroupVersionKind(capi.ClusterGVK(capi.V1Beta2).GroupVersion().WithKind("ClusterList"))
	if err := r.admin.List(ctx, clusters, client.InNamespace(r.ns)); err != nil {
		return nil, err
	}
	byName := map[string]*unstructured.Unstructured{}
	for i := range clusters.Items {
		byName[clusters.Items[i].GetName()] = &clusters.Items[i]
	}
	var out []string
	for i := range cms.Items {
		cm := &cms.Items[i]
		cluster := cm.Labels[capi.ClusterNameLabel]
		if cluster == "" || cm.Name != cluster+wire.LockSuffix || wire.LockOf(cm, cluster).Err != nil {
			continue
		}
		u := byName[cluster]
		switch {
		case u == nil:
			out = append(out, fmt.Sprintf("lock %s (rv %s): its cluster is gone and it was not collected", cm.Name, cm.ResourceVersion))
		case capi.IsControlPlaneInitialized(u):
			out = append(out, fmt.Sprintf("lock %s (rv %s): its cluster is initialised and it was not released", cm.Name, cm.ResourceVersion))
		}
	}
	sort.Strings(out)
	return out, nil
}

// barrier creates one object of each watched kind and waits until the
// watches deliver them: every earlier event has then been delivered.
func (r *runner) barrier(ctx context.Context) error {
	const name = "zz-barrier"
	objs := [numKinds]client.Object{
		KindConfigMap: &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: r.ns, Name: name}},
		KindMachine:   kubeenv.NewMachine(capi.V1Beta2, r.ns, name, name),
		KindCluster:   kubeenv.NewCluster(capi.V1Beta2, r.ns, name),
	}
	for _, o := range objs {
		if err := r.admin.Create(ctx, o); err != nil {
			return fmt.Errorf("creating the barrier %T: %w", o, err)
		}
	}
	wctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	for k := range objs {
		if err := r.watch.WaitSeen(wctx, k, name); err != nil {
			return err
		}
	}
	return nil
}

// checkForeign compares every planted ConfigMap with what was planted.
func (r *runner) checkForeign(ctx context.Context) {
	for _, f := range r.c.Foreign() {
		cm := &corev1.ConfigMap{}
		err := r.admin.Get(ctx, client.ObjectKey{Namespace: r.ns, Name: f.Name}, cm)
		switch {
		case apierrors.IsNotFound(err):
			r.c.Violate(InvForeignUntouched, "configmap %s, which is not a lock, was deleted", f.Name)
		case err != nil:
			r.fail(err)
		case string(cm.UID) != f.UID || cm.ResourceVersion != f.ResourceVersion || checksum(cm) != f.Checksum:
			r.c.Violate(InvForeignUntouched, "configmap %s, which is not a lock, changed: uid %s->%s, rv %s->%s, checksum %s->%s",
				f.Name, f.UID, cm.UID, f.ResourceVersion, cm.ResourceVersion, f.Checksum, checksum(cm))
		}
	}
}

// checksum hashes what a change to a ConfigMap could touch.
func checksum(cm *corev1.ConfigMap) string {
	b, err := json.Marshal([]any{cm.Labels, cm.Annotations, cm.Data, cm.BinaryData, cm.OwnerReferences, cm.Finalizers})
	if err != nil {
		panic(err)
	}
	s := sha256.Sum256(b)
	return hex.EncodeToString(s[:8])
}
