package velerosim

import (
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// Restore restores objs (typed or not) through cfg for a test, as a
// Restorer made with opts does, and returns them as the API server created
// them, in the order they were created. It fails t on any error.
func Restore[O client.Object](t testing.TB, cfg *rest.Config, opts Options, objs ...O) []*unstructured.Unstructured {
	t.Helper()
	items, err := Unstructured(objs...)
	if err != nil {
		t.Fatal(err)
	}
	r, err := New(cfg, opts)
	if err != nil {
		t.Fatal(err)
	}
	out, err := r.Restore(t.Context(), items)
	if err != nil {
		t.Fatal(err)
	}
	return out
}
