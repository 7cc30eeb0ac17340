package inventory

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/initlock/initlock/pkg/initlock/capi"
)

// snapshot is a client.Reader over the objects Gather listed: keeper.Inspect
// reads each cluster's lock from it as it would from the API server.
type snapshot struct {
	clusters map[key]*unstructured.Unstructured
	locks    map[key]*corev1.ConfigMap // by lock name
	machines map[key]*metav1.PartialObjectMetadata
}

var _ client.Reader = (*snapshot)(nil)

func (s *snapshot) Get(_ context.Context, k client.ObjectKey, obj client.Object, _ ...client.GetOption) error {
	id := key{k.Namespace, k.Name}
	switch o := obj.(type) {
	case *corev1.ConfigMap:
		if cm, ok := s.locks[id]; ok {
			cm.DeepCopyInto(o)
			return nil
		}
		return apierrors.NewNotFound(corev1.Resource("configmaps"), k.Name)
	case *unstructured.Unstructured:
		if u, ok := s.clusters[id]; ok && o.GetKind() == "Cluster" {
			gvk := o.GroupVersionKind()
			u.DeepCopyInto(o)
			o.SetGroupVersionKind(gvk)
			return nil
		}
		return apierrors.NewNotFound(schema.GroupResource{Group: capi.Group, Resource: "clusters"}, k.Name)
	case *metav1.PartialObjectMetadata:
		if m, ok := s.machines[id]; ok && o.GetObjectKind().GroupVersionKind().Kind == "Machine" {
			gvk := o.GroupVersionKind()
			m.DeepCopyInto(o)
			o.SetGroupVersionKind(gvk)
			return nil
		}
		return apierrors.NewNotFound(schema.GroupResource{Group: capi.Group, Resource: "machines"}, k.Name)
	}
	return fmt.Errorf("inventory snapshot: cannot read a %T", obj)
}

func (s *snapshot) List(context.Context, client.ObjectList, ...client.ListOption) error {
	return fmt.Errorf("inventory snapshot: lists are not supported")
}
