package initlock

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/initlock/initlock/internal/capi"
)

// clusterOwnerRef is the ownerReference a lock carries to its Cluster: no
// controller and no blockOwnerDeletion, as the upstream providers write it.
func clusterOwnerRef(cl Cluster) metav1.OwnerReference {
	return metav1.OwnerReference{APIVersion: cl.APIVersion, Kind: capi.ClusterKind, Name: cl.Name, UID: cl.UID}
}

// ownedBy returns refs with every Cluster API Cluster reference replaced by
// one to cl. Other references are kept as they are.
func ownedBy(refs []metav1.OwnerReference, cl Cluster) []metav1.OwnerReference {
	out := make([]metav1.OwnerReference, 0, len(refs)+1)
	for _, r := range refs {
		if r.Kind == capi.ClusterKind && capi.IsClusterAPIVersion(r.APIVersion) {
			continue
		}
		out = append(out, r)
	}
	return append(out, clusterOwnerRef(cl))
}

func (l *Locker) create(ctx context.Context, cl Cluster, rec Record, lockName string) (*corev1.ConfigMap, error) {
	now := l.clock.Now().UTC().Truncate(time.Second)
	rec.AcquiredAt = &now
	cm := &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{
			Namespace:       cl.Namespace,
			Name:            lockName,
			Labels:          map[string]string{ClusterNameLabel: cl.Name},
			OwnerReferences: []metav1.OwnerReference{clusterOwnerRef(cl)},
		},
		Data: map[string]string{DataKey: rec.Encode()},
	}
	if err := l.client.Create(ctx, cm); err != nil {
		return nil, err
	}
	return cm, nil
}

// adopt re-points the lock at the Cluster's current UID, refreshes the
// holder's UID when known and drops a cluster-absent mark, in one patch
// conditional on the resourceVersion read.
func (l *Locker) adopt(ctx context.Context, cm *corev1.ConfigMap, cl Cluster, holderUID types.UID) (*corev1.ConfigMap, error) {
	return adopt(ctx, l.client, cm, cl, holderUID)
}

func adopt(ctx context.Context, c client.Writer, cm *corev1.ConfigMap, cl Cluster, holderUID types.UID) (*corev1.ConfigMap, error) {
	rec, err := classify(cm, cl.Name)
	if err != nil {
		return nil, lockError(cm.Namespace, cm.Name, err)
	}
	next := cm.DeepCopy()
	next.OwnerReferences = ownedBy(cm.OwnerReferences, cl)
	if holderUID != "" && rec.MachineUID != holderUID {
		rec.MachineUID = holderUID
		next.Data[DataKey] = rec.Encode()
	}
	delete(next.Annotations, ClusterAbsentAnnotation)
	if err := c.Patch(ctx, next, client.MergeFromWithOptions(cm, client.MergeFromWithOptimisticLock{})); err != nil {
		return nil, err
	}
	return next, nil
}

// rewrite hands the lock to rec's machine, conditional on the
// resourceVersion read, keeping the lock owned by its Cluster.
func (l *Locker) rewrite(ctx context.Context, cm *corev1.ConfigMap, cl Cluster, rec Record) (*corev1.ConfigMap, error) {
	now := l.clock.Now().UTC().Truncate(time.Second)
	rec.AcquiredAt = &now
	next := cm.DeepCopy()
	next.OwnerReferences = ownedBy(cm.OwnerReferences, cl)
	if next.Data == nil {
		next.Data = map[string]string{}
	}
	next.Data[DataKey] = rec.Encode()
	delete(next.Annotations, ClusterAbsentAnnotation)
	if err := l.client.Patch(ctx, next, client.MergeFromWithOptions(cm, client.MergeFromWithOptimisticLock{})); err != nil {
		return nil, err
	}
	return next, nil
}

// writeGrant records the grant on the Machine, conditional on its UID so a
// Machine recreated under the same name never inherits it, and sets the
// annotation on obj too.
// It returns the Machine's resourceVersion after the write.
func (l *Locker) writeGrant(ctx context.Context, obj client.Object, m Machine, cluster string) (string, error) {
	// Microseconds: grants are ordered by their time, and two grants within
	// one second must not tie.
	now := l.clock.Now().UTC().Truncate(time.Microsecond)
	value := Grant{Cluster: cluster, AcquiredAt: &now}.encode()
	meta := map[string]any{"annotations": map[string]any{GrantAnnotation: value}}
	if m.UID != "" {
		meta["uid"] = m.UID
	}
	rv, err := l.patchMachine(ctx, m, meta)
	if err != nil {
		return "", fmt.Errorf("recording the init-lock grant on machine %s/%s: %w", m.Namespace, m.Name, err)
	}
	a := obj.GetAnnotations()
	if a == nil {
		a = map[string]string{}
	}
	a[GrantAnnotation] = value
	obj.SetAnnotations(a)
	return rv, nil
}

// clearGrant removes the grant record from the Machine, if it carries one
// for cluster. A missing Machine has no grant.
func (l *Locker) clearGrant(ctx context.Context, m Machine, cluster string) error {
	if m.Grant != nil && !m.Grant.For(cluster) {
		return nil
	}
	meta := map[string]any{"annotations": map[string]any{GrantAnnotation: nil}}
	_, err := l.patchMachine(ctx, m, meta)
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("withdrawing the init-lock grant from machine %s/%s: %w", m.Namespace, m.Name, err)
	}
	return nil
}

func (l *Locker) patchMachine(ctx context.Context, m Machine, meta map[string]any) (string, error) {
	body, err := json.Marshal(map[string]any{"metadata": meta})
	if err != nil {
		return "", err
	}
	pom := &metav1.PartialObjectMetadata{}
	pom.SetGroupVersionKind(machineGVK(m.APIVersion))
	pom.SetNamespace(m.Namespace)
	pom.SetName(m.Name)
	if err := l.client.Patch(ctx, pom, client.RawPatch(types.MergePatchType, body)); err != nil {
		return "", err
	}
	return pom.ResourceVersion, nil
}

// dropGrant removes the grant annotation from obj, the caller's copy.
func dropGrant(obj client.Object) {
	if obj == nil {
		return
	}
	a := obj.GetAnnotations()
	if _, ok := a[GrantAnnotation]; ok {
		delete(a, GrantAnnotation)
		obj.SetAnnotations(a)
	}
}
