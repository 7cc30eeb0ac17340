package engine

import (
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// syncCaller brings the caller's Cluster object in step with a write of the
// grant register that the API server answered with resp. When obj was the
// Cluster as it stood just before that write (resp is obj with only the
// register changed), obj gets resp's register and resourceVersion, so that
// the caller's next update of obj succeeds and keeps the register.
// Otherwise obj is left untouched: giving a stale object a fresh
// resourceVersion would let the caller's next update overwrite changes it
// never saw.
func syncCaller(obj client.Object, resp *unstructured.Unstructured) {
	if obj == nil || resp == nil {
		return
	}
	before, err := runtime.DefaultUnstructuredConverter.ToUnstructured(obj)
	if err != nil || !equality.Semantic.DeepEqual(comparable(before), comparable(resp.Object)) {
		return
	}
	a := map[string]string{}
	for k, v := range obj.GetAnnotations() {
		a[k] = v
	}
	if v, ok := resp.GetAnnotations()[GrantAnnotation]; ok {
		a[GrantAnnotation] = v
	} else {
		delete(a, GrantAnnotation)
	}
	if len(a) == 0 {
		a = nil
	}
	obj.SetAnnotations(a)
	obj.SetResourceVersion(resp.GetResourceVersion())
}

// comparable is a copy of a Cluster without what a write of the register
// changes, or what a typed copy of it may lack. The input is not modified.
func comparable(obj map[string]any) map[string]any {
	c := make(map[string]any, len(obj))
	for k, v := range obj {
		if k != "apiVersion" && k != "kind" {
			c[k] = v
		}
	}
	meta, ok := obj["metadata"].(map[string]any)
	if !ok {
		return c
	}
	m := make(map[string]any, len(meta))
	for k, v := range meta {
		if k != "resourceVersion" && k != "managedFields" && k != "annotations" {
			m[k] = v
		}
	}
	if a, ok := meta["annotations"].(map[string]any); ok {
		b := make(map[string]any, len(a))
		for k, v := range a {
			if k != GrantAnnotation {
				b[k] = v
			}
		}
		if len(b) > 0 {
			m["annotations"] = b
		}
	}
	c["metadata"] = m
	return c
}
