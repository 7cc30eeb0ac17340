package relink

import (
	"fmt"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	fakediscovery "k8s.io/client-go/discovery/fake"
	clienttesting "k8s.io/client-go/testing"
	testingclock "k8s.io/utils/clock/testing"
)

// TestKindMapper: kinds are mapped from one discovery snapshot; lookups
// that fail take a new snapshot at most once per DiscoveryRetry, however
// many kinds fail and however often; a kind served later is found after
// DiscoveryRetry.
func TestKindMapper(t *testing.T) {
	fake := &clienttesting.Fake{Resources: []*metav1.APIResourceList{{GroupVersion: "cluster.x-k8s.io/v1beta2",
		APIResources: []metav1.APIResource{{Name: "machines", Kind: "Machine", Namespaced: true}}}}}
	clock := testingclock.NewFakeClock(time.Now())
	m, err := newKindMapper(&fakediscovery.FakeDiscovery{Fake: fake}, clock)
	if err != nil {
		t.Fatal(err)
	}
	snapshots := func() int {
		n := 0
		for _, a := range fake.Actions() {
			if a.GetResource().Resource == "group" {
				n++
			}
		}
		return n
	}
	unknown := func() {
		t.Helper()
		for i := range 2000 {
			gk := schema.GroupKind{Group: fmt.Sprintf("g%d.example.invalid", i%50), Kind: fmt.Sprintf("Kind%d", i)}
			if _, err := m.RESTMapping(gk); !meta.IsNoMatchError(err) {
				t.Fatalf("RESTMapping(%s) = %v, want no match", gk, err)
			}
		}
	}

	machine := schema.GroupKind{Group: "cluster.x-k8s.io", Kind: "Machine"}
	for _, versions := range [][]string{nil, {"v1beta2"}, {"v1beta2"}, {"v1beta2", "v1beta1"}} {
		if mapping, err := m.RESTMapping(machine, versions...); err != nil || mapping.Resource.Resource != "machines" || mapping.Scope.Name() != meta.RESTScopeNameNamespace {
			t.Fatalf("RESTMapping(%v) = %+v, %v", versions, mapping, err)
		}
	}
	unknown()
	unknown()
	if n := snapshots(); n != 1 {
		t.Fatalf("%d discovery snapshots within DiscoveryRetry, want the first only", n)
	}
	clock.Step(DiscoveryRetry)
	unknown()
	unknown()
	if n := snapshots(); n != 2 {
		t.Fatalf("%d discovery snapshots, want one more after DiscoveryRetry", n)
	}

	fake.Resources = append(fake.Resources, &metav1.APIResourceList{GroupVersion: "example.com/v1",
		APIResources: []metav1.APIResource{{Name: "widgets", Kind: "Widget"}}})
	widget := schema.GroupKind{Group: "example.com", Kind: "Widget"}
	if _, err := m.RESTMapping(widget); !meta.IsNoMatchError(err) {
		t.Fatalf("a kind served after the snapshot is found before DiscoveryRetry: %v", err)
	}
	clock.Step(DiscoveryRetry)
	if mapping, err := m.RESTMapping(widget); err != nil || mapping.Scope.Name() != meta.RESTScopeNameRoot {
		t.Fatalf("RESTMapping(Widget) after DiscoveryRetry = %+v, %v", mapping, err)
	}
	if _, err := m.RESTMapping(machine, "v1alpha4"); !meta.IsNoMatchError(err) {
		t.Fatalf("a version not served: %v", err)
	}
	if n := snapshots(); n != 3 {
		t.Fatalf("%d discovery snapshots, want 3", n)
	}
}
