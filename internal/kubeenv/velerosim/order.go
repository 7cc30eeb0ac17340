package velerosim

import (
	"cmp"
	"context"
	"fmt"
	"slices"

	"github.com/vmware-tanzu/velero/pkg/cmd/server/config"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// Sort returns items in the order Velero restores them: by resource in its
// default restore priorities (the high-priority list, then the other
// resources alphabetically, then the low-priority list), and by namespace
// and name within a resource. items is not changed.
func (r *Restorer) Sort(items []*unstructured.Unstructured) ([]*unstructured.Unstructured, error) {
	type keyed struct {
		rank     int
		resource string
		obj      *unstructured.Unstructured
	}
	p := config.GetDefaultConfig().RestoreResourcePriorities
	out := make([]keyed, 0, len(items))
	for _, o := range items {
		gr, err := r.resource(o)
		if err != nil {
			return nil, err
		}
		res := gr.String()
		k := keyed{rank: 1, resource: res, obj: o}
		if i := slices.Index(p.HighPriorities, res); i >= 0 {
			k.rank, k.resource = 0, fmt.Sprintf("%04d", i)
		} else if i := slices.Index(p.LowPriorities, res); i >= 0 {
			k.rank, k.resource = 2, fmt.Sprintf("%04d", i)
		}
		out = append(out, k)
	}
	slices.SortStableFunc(out, func(a, b keyed) int {
		return cmp.Or(cmp.Compare(a.rank, b.rank), cmp.Compare(a.resource, b.resource),
			cmp.Compare(a.obj.GetNamespace(), b.obj.GetNamespace()), cmp.Compare(a.obj.GetName(), b.obj.GetName()))
	})
	sorted := make([]*unstructured.Unstructured, len(out))
	for i, k := range out {
		sorted[i] = k.obj
	}
	return sorted, nil
}

// Backup reads every object of the given kinds in namespace ns, as the API
// server serves them, as a Velero backup of the namespace holds them: less
// the objects being deleted, which Velero skips (pkg/backup/item_backupper.go,
// "Skipping item because it's being deleted"), and less the ConfigMap
// kube-root-ca.crt that the API server publishes in every namespace.
func Backup(ctx context.Context, c client.Reader, ns string, kinds ...schema.GroupVersionKind) ([]*unstructured.Unstructured, error) {
	all, err := List(ctx, c, ns, kinds...)
	if err != nil {
		return nil, err
	}
	return slices.DeleteFunc(all, func(u *unstructured.Unstructured) bool { return u.GetDeletionTimestamp() != nil }), nil
}

// List reads every object of the given kinds in namespace ns, those being
// deleted included (less kube-root-ca.crt): what is left in it.
func List(ctx context.Context, c client.Reader, ns string, kinds ...schema.GroupVersionKind) ([]*unstructured.Unstructured, error) {
	var out []*unstructured.Unstructured
	for _, gvk := range kinds {
		list := &unstructured.UnstructuredList{}
		list.SetGroupVersionKind(gvk.GroupVersion().WithKind(gvk.Kind + "List"))
		if err := c.List(ctx, list, client.InNamespace(ns)); err != nil {
			return nil, fmt.Errorf("listing %ss of namespace %s: %w", gvk.Kind, ns, err)
		}
		for i := range list.Items {
			if gvk.Kind == "ConfigMap" && gvk.Group == "" && list.Items[i].GetName() == "kube-root-ca.crt" {
				continue
			}
			out = append(out, list.Items[i].DeepCopy())
		}
	}
	return out, nil
}
