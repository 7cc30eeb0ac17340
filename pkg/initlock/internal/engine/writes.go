package engine

import (
	"context"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/initlock/initlock/pkg/initlock/capi"
)

// createLock creates cl's lock holding rec. It fails with AlreadyExists if
// any ConfigMap has the lock's name.
func createLock(ctx context.Context, c client.Writer, cl Cluster, lockName string, rec Record) (*corev1.ConfigMap, error) {
	cm := &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{
			Namespace:       cl.Namespace,
			Name:            lockName,
			Labels:          map[string]string{ClusterNameLabel: cl.Name},
			OwnerReferences: []metav1.OwnerReference{clusterOwnerRef(cl)},
		},
		Data: map[string]string{DataKey: rec.Encode()},
	}
	if err := c.Create(ctx, cm); err != nil {
		return nil, err
	}
	return cm, nil
}

// rewriteLock replaces the record of lock cm with rec, keeps it owned by
// cl and drops a cluster-absent mark, a release mark and a move's mark
// (the lock names a new holder, which the admission policy keeps it for),
// conditional on the resourceVersion read.
func rewriteLock(ctx context.Context, c client.Writer, cm *corev1.ConfigMap, cl Cluster, rec Record) (*corev1.ConfigMap, error) {
	next := cm.DeepCopy()
	next.OwnerReferences = ownedBy(cm.OwnerReferences, cl)
	if next.Data == nil {
		next.Data = map[string]string{}
	}
	next.Data[DataKey] = rec.Encode()
	delete(next.Annotations, ClusterAbsentAnnotation)
	dropMarks(next)
	if err := c.Patch(ctx, next, client.MergeFromWithOptions(cm, client.MergeFromWithOptimisticLock{})); err != nil {
		return nil, err
	}
	return next, nil
}

// adoptLock points lock cm at cl's current UID and drops a cluster-absent
// mark, a release mark and a move's mark, conditional on the resourceVersion
// read: the lock is its Cluster's again, held for the Machine its record
// names, which it keeps.
func adoptLock(ctx context.Context, c client.Writer, cm *corev1.ConfigMap, cl Cluster) (*corev1.ConfigMap, error) {
	if _, err := classify(cm, cl.Name); err != nil {
		return nil, lockError(cm.Namespace, cm.Name, err)
	}
	next := cm.DeepCopy()
	next.OwnerReferences = ownedBy(cm.OwnerReferences, cl)
	delete(next.Annotations, ClusterAbsentAnnotation)
	dropMarks(next)
	if err := c.Patch(ctx, next, client.MergeFromWithOptions(cm, client.MergeFromWithOptimisticLock{})); err != nil {
		return nil, err
	}
	return next, nil
}

// ownedBy returns refs with every Cluster API Cluster reference replaced by
// one to cl. Other references are kept as they are.
func ownedBy(refs []metav1.OwnerReference, cl Cluster) []metav1.OwnerReference {
	out := make([]metav1.OwnerReference, 0, len(refs)+1)
	for _, r := range refs {
		if isCluster(r.APIVersion, r.Kind) {
			continue
		}
		out = append(out, r)
	}
	return append(out, clusterOwnerRef(cl))
}

// clusterOwnerRef is the ownerReference a lock carries to its Cluster: no
// controller and no blockOwnerDeletion, as the upstream providers write it.
func clusterOwnerRef(cl Cluster) metav1.OwnerReference {
	return metav1.OwnerReference{APIVersion: cl.APIVersion, Kind: capi.ClusterGVK("").Kind, Name: cl.Name, UID: cl.UID}
}

// writeRegister writes value into cl's grant register with a
// compare-and-swap against the register read into cl (registerPatch), and
// returns the Cluster as the API server returned it.
func writeRegister(ctx context.Context, c client.Writer, cl Cluster, value string) (*unstructured.Unstructured, error) {
	u := clusterObject(cl)
	if err := c.Patch(ctx, u, client.RawPatch(types.JSONPatchType, registerPatch(cl, value))); err != nil {
		return nil, err
	}
	return u, nil
}

// clusterObject is an empty unstructured Cluster of cl's version, namespace
// and name, to read or patch it.
func clusterObject(cl Cluster) *unstructured.Unstructured {
	u := &unstructured.Unstructured{}
	u.SetAPIVersion(cl.APIVersion)
	u.SetKind(capi.ClusterGVK("").Kind)
	u.SetNamespace(cl.Namespace)
	u.SetName(cl.Name)
	return u
}

// newGrant is the register value that grants the lock to m with token.
func newGrant(cl Cluster, m Machine, token string, now time.Time) string {
	at := now.UTC().Truncate(time.Second)
	return Grant{Ref: refTo(cl, m), Token: token, AcquiredAt: &at}.encode()
}

// retiredGrant is the register value that keeps g's Machine granted under a
// new token: the first step of a release.
func retiredGrant(g *Grant, token string) string {
	return Grant{Ref: g.Ref, Token: token, AcquiredAt: g.AcquiredAt}.encode()
}

// releasedGrant is the register value that records a release.
func releasedGrant(token string, now time.Time) string {
	at := now.UTC().Truncate(time.Second)
	return Grant{Token: token, ReleasedAt: &at}.encode()
}

// refTo is how a record written now names Machine m of Cluster cl.
func refTo(cl Cluster, m Machine) Ref {
	return Ref{MachineName: m.Name, MachineUID: m.UID, ClusterUID: cl.UID}
}
