package apimodel_test

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/initlock/initlock/internal/kubeenv/apimodel"
)

// A list by pages serves every object once, in order, each page at the
// first page's revision: an object created or deleted between pages is not
// seen, and one deleted is still served.
func TestListPages(t *testing.T) {
	ctx := t.Context()
	c := &apimodel.Client{Store: apimodel.NewStore()}
	cm := func(name string) *corev1.ConfigMap {
		return &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name}}
	}
	for _, name := range []string{"a", "b", "c"} {
		if err := c.Create(ctx, cm(name)); err != nil {
			t.Fatal(err)
		}
	}
	var names []string
	list := &corev1.ConfigMapList{}
	if err := c.List(ctx, list, client.InNamespace("ns"), client.Limit(2)); err != nil {
		t.Fatal(err)
	}
	for _, i := range list.Items {
		names = append(names, i.Name)
	}
	first, next := list.ResourceVersion, list.Continue
	if next == "" {
		t.Fatalf("first page of 2 of 3 objects has no continue token: %v", names)
	}
	if err := c.Create(ctx, cm("d")); err != nil {
		t.Fatal(err)
	}
	if err := c.Delete(ctx, cm("c")); err != nil {
		t.Fatal(err)
	}
	list = &corev1.ConfigMapList{}
	if err := c.List(ctx, list, client.InNamespace("ns"), client.Limit(2), client.Continue(next)); err != nil {
		t.Fatal(err)
	}
	for _, i := range list.Items {
		names = append(names, i.Name)
	}
	if got := len(names); got != 3 || names[0] != "a" || names[1] != "b" || names[2] != "c" {
		t.Errorf("pages served %v, want [a b c]", names)
	}
	if list.Continue != "" || list.ResourceVersion != first {
		t.Errorf("last page: continue %q, resourceVersion %s, want none and %s", list.Continue, list.ResourceVersion, first)
	}
	if err := c.List(ctx, list, client.Continue("nonsense")); err == nil {
		t.Error("a continue token the model did not make was taken")
	}
}
