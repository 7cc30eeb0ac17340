package relink

import (
	"testing"

	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

type countingMapper struct {
	meta.RESTMapper
	calls int
}

func (c *countingMapper) RESTMapping(gk schema.GroupKind, versions ...string) (*meta.RESTMapping, error) {
	c.calls++
	return c.RESTMapper.RESTMapping(gk, versions...)
}

func TestMemoMapper(t *testing.T) {
	gv := schema.GroupVersion{Group: "cluster.x-k8s.io", Version: "v1beta2"}
	inner := meta.NewDefaultRESTMapper([]schema.GroupVersion{gv})
	inner.Add(gv.WithKind("Machine"), meta.RESTScopeNamespace)
	c := &countingMapper{RESTMapper: inner}
	m := newMemoMapper(c)
	gk := schema.GroupKind{Group: gv.Group, Kind: "Machine"}

	for range 3 {
		mapping, err := m.RESTMapping(gk, "v1beta2")
		if err != nil || mapping.Resource.Resource != "machines" || mapping.Scope.Name() != meta.RESTScopeNameNamespace {
			t.Fatalf("RESTMapping = %+v, %v", mapping, err)
		}
	}
	if c.calls != 1 {
		t.Fatalf("inner mapper called %d times, want 1", c.calls)
	}
	for range 2 {
		if _, err := m.RESTMapping(schema.GroupKind{Group: gv.Group, Kind: "Missing"}); err == nil {
			t.Fatal("RESTMapping of an unknown kind succeeded")
		}
	}
	if c.calls != 3 {
		t.Fatalf("failures must not be remembered: %d calls", c.calls)
	}
	if _, err := m.RESTMapping(gk, "v1beta2", "v1beta1"); err != nil || c.calls != 4 {
		t.Fatalf("several versions: %v, %d calls", err, c.calls)
	}
}
