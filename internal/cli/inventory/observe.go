package inventory

import (
	"context"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/initlock/initlock/internal/capi"
	"github.com/initlock/initlock/pkg/initlock"
)

// Observe reads one cluster's lock live: the ConfigMap with its lock name,
// the Cluster, the holder Machine when the lock names one and, when the
// Cluster is not initialised, the Machine its grant register names.
// It is what a caller does after a conflict. The Cluster and the ConfigMap
// may each be missing; clusterName must be a valid cluster name.
func Observe(ctx context.Context, c Reader, version, namespace, clusterName string) (Entry, error) {
	if version == "" {
		version = capi.V1Beta2
	}
	lockName, err := initlock.LockName(clusterName)
	if err != nil {
		return Entry{}, err
	}
	e := Entry{Namespace: namespace, ClusterName: clusterName, LockName: lockName}
	cm := &corev1.ConfigMap{}
	switch err := c.Get(ctx, client.ObjectKey{Namespace: namespace, Name: lockName}, cm); {
	case apierrors.IsNotFound(err):
		cm = nil
	case err != nil:
		return Entry{}, GetError(err, "configmap", "configmaps", "", namespace, lockName)
	}
	var cl *initlock.Cluster
	u := &unstructured.Unstructured{}
	u.SetGroupVersionKind(capi.ClusterGVK(version))
	switch err := c.Get(ctx, client.ObjectKey{Namespace: namespace, Name: clusterName}, u); {
	case apierrors.IsNotFound(err):
	case err != nil:
		return Entry{}, GetError(err, "cluster", "clusters", capi.Group, namespace, clusterName)
	default:
		u.SetGroupVersionKind(capi.ClusterGVK(version))
		got, err := initlock.ClusterFrom(u, nil)
		if err != nil {
			return Entry{}, err
		}
		cl = &got
	}
	var holder *initlock.Machine
	if cm != nil {
		if l := initlock.ObserveLock(cm, clusterName); l.Problem == nil {
			if holder, err = getMachine(ctx, c, version, namespace, l.Record.MachineName); err != nil {
				return Entry{}, err
			}
		}
	}
	e.ConfigMap = cm
	e.Observation = initlock.Observe(clusterName, cm, cl, holder)
	if cl != nil && cl.Grant != nil && !cl.Grant.Damaged() && !cl.Initialized {
		if e.Observation.Granted, err = getMachine(ctx, c, version, namespace, cl.Grant.MachineName); err != nil {
			return Entry{}, err
		}
	}
	return e, nil
}

func getMachine(ctx context.Context, c Reader, version, namespace, name string) (*initlock.Machine, error) {
	pom := &metav1.PartialObjectMetadata{}
	pom.SetGroupVersionKind(capi.MachineGVK(version))
	err := c.Get(ctx, client.ObjectKey{Namespace: namespace, Name: name}, pom)
	if apierrors.IsNotFound(err) {
		return nil, nil
	}
	if err != nil {
		return nil, GetError(err, "machine", "machines", capi.Group, namespace, name)
	}
	pom.SetGroupVersionKind(capi.MachineGVK(version))
	m, err := initlock.MachineFrom(pom, nil)
	if err != nil {
		return nil, err
	}
	return &m, nil
}
