package apimodel

import (
	"context"
	"fmt"
	"strconv"
	"strings"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

func labelsOf(obj map[string]any) map[string]string {
	out := map[string]string{}
	m, _ := metadata(obj)["labels"].(map[string]any)
	for k, v := range m {
		out[k], _ = v.(string)
	}
	return out
}

// List reads the objects of list's kind live, with the namespace, label
// selector and page (limit, continue) of opts. A page is read, as the API
// server reads it, at the revision of the list's first page: a continued
// list does not see writes made since. Field selectors and the
// resourceVersion options are not modelled and are refused.
func (c *Client) List(ctx context.Context, list client.ObjectList, opts ...client.ListOption) error {
	kind, err := listKind(list)
	if err != nil {
		return err
	}
	lo := (&client.ListOptions{}).ApplyOptions(opts)
	if lo.FieldSelector != nil || lo.Raw != nil {
		return apierrors.NewBadRequest(fmt.Sprintf("apimodel: list %s: only the namespace, label selector and page options are modelled", kind))
	}
	k := Key{Kind: kind, Namespace: lo.Namespace}
	var sel labels.Selector
	var body []string
	if lo.LabelSelector != nil && !lo.LabelSelector.Empty() {
		sel = lo.LabelSelector
		body = append(body, "labelSelector="+lo.LabelSelector.String())
	}
	var from *page
	if lo.Continue != "" {
		if from, err = parseContinue(lo.Continue); err != nil {
			return err
		}
		body = append(body, "continue="+lo.Continue)
	}
	if lo.Limit > 0 {
		body = append(body, "limit="+strconv.FormatInt(lo.Limit, 10))
	}
	res, err := c.do(ctx, "list", k, strings.Join(body, "&"), func() (map[string]any, error) {
		items, rv, next := c.Store.listPage(k, sel, from, lo.Limit)
		return listResult(items, rv, next), nil
	})
	if err != nil {
		return err
	}
	return fillList(list, res)
}

func listResult(items []map[string]any, rv, next string) map[string]any {
	out := make([]any, len(items))
	for i := range items {
		out[i] = items[i]
	}
	meta := map[string]any{"resourceVersion": rv}
	if next != "" {
		meta["continue"] = next
	}
	return map[string]any{"metadata": meta, "items": out}
}

// listKind is the kind of the items of list: ConfigMapList lists
// ConfigMaps.
func listKind(list client.ObjectList) (string, error) {
	var kind string
	switch l := list.(type) {
	case *unstructured.UnstructuredList:
		kind = l.GetKind()
	case *metav1.PartialObjectMetadataList:
		kind = l.GroupVersionKind().Kind
	default:
		gvks, _, err := scheme.ObjectKinds(list)
		if err != nil {
			return "", fmt.Errorf("apimodel: %T is not served: %w", list, err)
		}
		kind = gvks[0].Kind
	}
	item, ok := strings.CutSuffix(kind, "List")
	if _, known := served[item]; !ok || !known {
		return "", fmt.Errorf("apimodel: %T of kind %q is not served", list, kind)
	}
	return item, nil
}

// fillList sets list from a stored list (metadata.resourceVersion and
// items), in list's form.
func fillList(list client.ObjectList, res map[string]any) error {
	rv := res["metadata"].(map[string]any)["resourceVersion"].(string)
	next, _ := res["metadata"].(map[string]any)["continue"].(string)
	items := res["items"].([]any)
	switch l := list.(type) {
	case *unstructured.UnstructuredList:
		l.SetResourceVersion(rv)
		l.SetContinue(next)
		l.Items = make([]unstructured.Unstructured, len(items))
		for i, it := range items {
			l.Items[i].Object = it.(map[string]any)
		}
		return nil
	case *metav1.PartialObjectMetadataList:
		gvk := l.GroupVersionKind()
		l.ListMeta = metav1.ListMeta{ResourceVersion: rv, Continue: next}
		l.Items = make([]metav1.PartialObjectMetadata, len(items))
		for i, it := range items {
			l.Items[i].SetGroupVersionKind(gvk.GroupVersion().WithKind(strings.TrimSuffix(gvk.Kind, "List")))
			if err := fill(&l.Items[i], it.(map[string]any)); err != nil {
				return err
			}
		}
		l.SetGroupVersionKind(gvk)
		return nil
	}
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(res, list); err != nil {
		return err
	}
	if gvks, _, err := scheme.ObjectKinds(list); err == nil && len(gvks) > 0 {
		list.GetObjectKind().SetGroupVersionKind(gvks[0])
	}
	return nil
}
