package initlock

import (
	"context"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
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
// The holder's own adoption also makes a handed-over record its own.
func (l *Locker) adopt(ctx context.Context, cm *corev1.ConfigMap, cl Cluster, holderUID types.UID) (*corev1.ConfigMap, error) {
	return adopt(ctx, l.client, cm, cl, holderUID, true)
}

func adopt(ctx context.Context, c client.Writer, cm *corev1.ConfigMap, cl Cluster, holderUID types.UID, own bool) (*corev1.ConfigMap, error) {
	rec, err := classify(cm, cl.Name)
	if err != nil {
		return nil, lockError(cm.Namespace, cm.Name, err)
	}
	next := cm.DeepCopy()
	next.OwnerReferences = ownedBy(cm.OwnerReferences, cl)
	if (holderUID != "" && rec.MachineUID != holderUID) || (own && rec.HandedOverBy != "") {
		if holderUID != "" {
			rec.MachineUID = holderUID
		}
		if own {
			rec.HandedOverBy = ""
		}
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

// claim writes a new grant for m into the Cluster's grant register, if the
// register still holds prev (nil: empty). It returns the value it wrote, or
// tried to write: an error other than a failed test (casFailed) may come
// after the write was applied. A register that changed meanwhile fails the
// patch's test: the API server answers 422 Invalid and writes nothing.
func (l *Locker) claim(ctx context.Context, cl Cluster, prev *Grant, m Machine) (string, error) {
	// Microseconds keep two grants of one Machine apart, so that a
	// withdrawal never removes a later grant.
	now := l.clock.Now().UTC().Truncate(time.Microsecond)
	value := Grant{MachineName: m.Name, MachineUID: m.UID, ClusterUID: cl.UID, AcquiredAt: &now}.encode()
	if err := l.patchCluster(ctx, cl, claimPatch(prev, cl.HasAnnotations, value)); err != nil {
		return value, fmt.Errorf("recording the init-lock grant of machine %s on cluster %s/%s: %w", m.Name, cl.Namespace, cl.Name, err)
	}
	return value, nil
}

// withdraw empties the Cluster's grant register if it still holds value.
// A Cluster that is gone has no grant to withdraw. A register that holds
// anything else fails the patch's test (casFailed): the error says so, and
// nothing was written.
func (l *Locker) withdraw(ctx context.Context, cl Cluster, value string) error {
	err := l.patchCluster(ctx, cl, withdrawPatch(value))
	if err == nil || apierrors.IsNotFound(err) {
		return nil
	}
	return fmt.Errorf("withdrawing the init-lock grant from cluster %s/%s: %w", cl.Namespace, cl.Name, err)
}

func (l *Locker) patchCluster(ctx context.Context, cl Cluster, body []byte) error {
	u := clusterObject(cl)
	return l.client.Patch(ctx, u, client.RawPatch(types.JSONPatchType, body))
}

// clusterObject is an empty unstructured Cluster of cl's version, namespace
// and name, to read or patch it.
func clusterObject(cl Cluster) *unstructured.Unstructured {
	u := &unstructured.Unstructured{}
	u.SetAPIVersion(cl.APIVersion)
	u.SetKind(capi.ClusterKind)
	u.SetNamespace(cl.Namespace)
	u.SetName(cl.Name)
	return u
}

// casFailed tells whether a write to the grant register failed because the
// register, or the Cluster's annotations, changed since they were read.
func casFailed(err error) bool { return apierrors.IsInvalid(err) || apierrors.IsConflict(err) }

// setGrant records value as the grant register of obj, the caller's copy of
// the Cluster ("" empties it), so that a later call with the same object
// sees what this call wrote.
func setGrant(obj client.Object, value string) {
	if obj == nil {
		return
	}
	a := obj.GetAnnotations()
	if value == "" {
		if _, ok := a[GrantAnnotation]; ok {
			delete(a, GrantAnnotation)
			obj.SetAnnotations(a)
		}
		return
	}
	if a == nil {
		a = map[string]string{}
	}
	a[GrantAnnotation] = value
	obj.SetAnnotations(a)
}
