package apimodel_test

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/selection"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/initlock/initlock/internal/kubeenv"
	"github.com/initlock/initlock/internal/kubeenv/wire"
	"github.com/initlock/initlock/pkg/initlock/capi"
)

// scriptLabel marks the objects of one run of the list script, with its
// namespace as value, so that a list of every namespace on the API server
// finds only them.
const scriptLabel = "initlock.dev/conformance"

// listScript lists ConfigMaps, Clusters and Machines in the forms the
// project's code lists them (typed, unstructured, metadata only), by
// namespace and by label selector, around writes.
var listScript = []step{
	{"list ConfigMaps of a label in an empty namespace", listConfigMaps(client.HasLabels{scriptLabel})},
	{"create the lock", createLock},
	{"create a ConfigMap of another cluster", func(ctx context.Context, b *backend) error {
		return b.c.Create(ctx, b.labelled(kubeenv.NewLock(b.ns, "c2", "m2", nil)))
	}},
	{"create an unlabelled ConfigMap", func(ctx context.Context, b *backend) error {
		return b.c.Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: b.ns, Name: "c1-other",
			Labels: map[string]string{scriptLabel: b.ns}}, Data: map[string]string{"k": "v"}})
	}},
	{"create two Clusters", func(ctx context.Context, b *backend) error {
		for _, name := range []string{"c2", "c1"} {
			if err := b.c.Create(ctx, b.labelled(kubeenv.NewCluster(capi.V1Beta2, b.ns, name))); err != nil {
				return err
			}
		}
		return nil
	}},
	{"create a Machine of each", func(ctx context.Context, b *backend) error {
		for _, cl := range []string{"c1", "c2"} {
			if err := b.c.Create(ctx, b.labelled(kubeenv.NewMachine(capi.V1Beta2, b.ns, cl, "m-"+cl))); err != nil {
				return err
			}
		}
		return nil
	}},
	{"list the ConfigMaps of one cluster", listConfigMaps(client.MatchingLabels{wire.ClusterNameLabel: "c1"})},
	{"list the ConfigMaps with a cluster-name label", listConfigMaps(client.HasLabels{wire.ClusterNameLabel})},
	{"list by a set-based selector", listConfigMaps(setBased())},
	{"list by a selector nothing matches", listConfigMaps(client.MatchingLabels{wire.ClusterNameLabel: "c3"})},
	{"list the Clusters of the namespace", listUnstructured(capi.ClusterGVK(capi.V1Beta2))},
	{"list the Machines of the namespace", listUnstructured(capi.MachineGVK(capi.V1Beta2))},
	{"list the metadata of one cluster's Machines", listMetadata(client.MatchingLabels{capi.ClusterNameLabel: "c2"})},
	{"list every namespace by label", func(ctx context.Context, b *backend) error {
		return b.list(ctx, &corev1.ConfigMapList{}, client.MatchingLabels{scriptLabel: b.ns})
	}},
	{"delete the unlabelled ConfigMap", func(ctx context.Context, b *backend) error {
		return b.c.Delete(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: b.ns, Name: "c1-other"}})
	}},
	{"a list after the delete", afterWrite(listConfigMaps(client.HasLabels{scriptLabel}))},
}

// afterWrite is list, which must answer a resourceVersion above the last
// list's: a write was made since.
func afterWrite(list func(context.Context, *backend) error) func(context.Context, *backend) error {
	return func(ctx context.Context, b *backend) error {
		b.wrote = true
		return list(ctx, b)
	}
}

// labelled adds the script's label to obj.
func (b *backend) labelled(obj client.Object) client.Object {
	l := obj.GetLabels()
	if l == nil {
		l = map[string]string{}
	}
	l[scriptLabel] = b.ns
	obj.SetLabels(l)
	return obj
}

func setBased() client.ListOption {
	in, _ := labels.NewRequirement(wire.ClusterNameLabel, selection.In, []string{"c1", "c2"})
	notOther, _ := labels.NewRequirement("example.com/other", selection.DoesNotExist, nil)
	return client.MatchingLabelsSelector{Selector: labels.NewSelector().Add(*in, *notOther)}
}

func listConfigMaps(sel client.ListOption) func(context.Context, *backend) error {
	return func(ctx context.Context, b *backend) error {
		return b.list(ctx, &corev1.ConfigMapList{}, client.InNamespace(b.ns), sel)
	}
}

func listUnstructured(gvk schema.GroupVersionKind) func(context.Context, *backend) error {
	return func(ctx context.Context, b *backend) error {
		l := &unstructured.UnstructuredList{}
		l.SetGroupVersionKind(gvk.GroupVersion().WithKind(gvk.Kind + "List"))
		return b.list(ctx, l, client.InNamespace(b.ns))
	}
}

func listMetadata(sel client.ListOption) func(context.Context, *backend) error {
	return func(ctx context.Context, b *backend) error {
		l := &metav1.PartialObjectMetadataList{}
		l.SetGroupVersionKind(capi.MachineGVK(capi.V1Beta2).GroupVersion().WithKind("Machine" + "List"))
		return b.list(ctx, l, client.InNamespace(b.ns), sel)
	}
}

// list lists into l with opts and keeps what it answered (describeList).
func (b *backend) list(ctx context.Context, l client.ObjectList, opts ...client.ListOption) error {
	if err := b.c.List(ctx, l, opts...); err != nil {
		return err
	}
	items, err := meta.ExtractList(l)
	if err != nil {
		return err
	}
	b.listed = describeList(b, l, items)
	return nil
}

// describeList is what a list answered, the same on both backends: each
// item's namespace (as "ns" for the script's), name, kind, labels and,
// for a ConfigMap, data; and whether the list's resourceVersion is at
// least that of each item and of the last list (above it when a write was
// made since), as a consistent read's must be. The values differ: the API
// server's revision counts every write to etcd.
func describeList(b *backend, l client.ObjectList, items []runtime.Object) []string {
	listRV, err := strconv.ParseInt(l.GetResourceVersion(), 10, 64)
	out := []string{fmt.Sprintf("list resourceVersion parses: %t", err == nil)}
	atLeast := listRV >= b.listRV && (!b.wrote || listRV > b.listRV)
	b.listRV, b.wrote = listRV, false
	for _, it := range items {
		obj := it.(client.Object)
		rv, _ := strconv.ParseInt(obj.GetResourceVersion(), 10, 64)
		atLeast = atLeast && listRV >= rv
		ns := obj.GetNamespace()
		if ns == b.ns {
			ns = "ns"
		}
		l := obj.GetLabels()
		keys := make([]string, 0, len(l))
		for k, v := range l {
			if v == b.ns {
				v = "ns"
			}
			keys = append(keys, k+"="+v)
		}
		slices.Sort(keys)
		item := fmt.Sprintf("%s/%s kind=%q labels=%s", ns, obj.GetName(), obj.GetObjectKind().GroupVersionKind().Kind, strings.Join(keys, ","))
		if cm, ok := obj.(*corev1.ConfigMap); ok {
			item += fmt.Sprintf(" data=%v", cm.Data)
		}
		out = append(out, item)
	}
	return append(out, fmt.Sprintf("list resourceVersion at least every item's and the last list's: %t", atLeast))
}
