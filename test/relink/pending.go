package relinksuite

import (
	"errors"
	"fmt"
	"slices"
	"testing"

	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/initlock/initlock/internal/kubeenv"
	"github.com/initlock/initlock/internal/relink"
	"github.com/initlock/initlock/pkg/initlock/capi"
)

// Pending runs the case of relink.FindPending, what kubectl initlock
// relinks lists: the objects that carry the annotation, as the relinker's
// selectors take them, each recorded owner judged on a live read, one read
// per owner and one list per kind, and nothing written.
func Pending(t *testing.T, b Backend) {
	f := newFixture(t, b, relink.Options{})
	cluster := f.restore(backedUp(kubeenv.NewCluster(capi.V1Beta2, f.ns, "c1")))
	f.restore(backedUp(kubeenv.NewMachine(capi.V1Beta2, f.ns, "c1", "m-0"), oldRef(clusterGVK, "c1", false)))
	f.restore(backedUp(configMap(f.ns, "a", "c1"), oldRef(clusterGVK, "c1", false)))
	f.restore(backedUp(configMap(f.ns, "b", "c1"), oldRef(clusterGVK, "c1", false), oldRef(machineGVK, "m-gone", true)))
	f.restore(backedUp(configMap(f.ns, "linked", "c1")))
	// Without the cluster-name label: outside the ConfigMaps' selector.
	unlabelled := f.restoredItem(backedUp(configMap(f.ns, "unlabelled", "c1"), oldRef(clusterGVK, "c1", false)))
	labels := unlabelled.GetLabels()
	delete(labels, capi.ClusterNameLabel)
	unlabelled.SetLabels(labels)
	f.create(unlabelled)
	bad := f.restoredItem(backedUp(configMap(f.ns, "bad", "c1")))
	bad.SetAnnotations(map[string]string{relink.Annotation: "{not json"})
	f.create(bad)

	f.counter.Reset()
	pending, skipped, err := relink.FindPending(t.Context(), f.c, f.ns, []schema.GroupVersionKind{clusterGVK, machineGVK, configMapGVK})
	if err != nil || len(skipped) > 0 {
		t.Fatalf("FindPending = %v, skipped %v", err, skipped)
	}
	var got []string
	for _, p := range pending {
		line := p.GVK.Kind + " " + p.Name + ":"
		if p.Err != nil {
			line += " unreadable"
			if !errors.Is(p.Err, relink.ErrInvalidAnnotation) {
				t.Errorf("%s: error %v does not wrap ErrInvalidAnnotation", p.Name, p.Err)
			}
		}
		for _, j := range p.Owners {
			line += fmt.Sprintf(" %s %s %s uid=%s", j.Owner.Kind, j.Owner.Name, j.Verdict, j.UID)
		}
		got = append(got, line)
	}
	uid := string(cluster.GetUID())
	want := []string{
		"Machine m-0: Cluster c1 same-restore uid=" + uid,
		"ConfigMap a: Cluster c1 same-restore uid=" + uid,
		"ConfigMap b: Cluster c1 same-restore uid=" + uid + " Machine m-gone not-found uid=",
		"ConfigMap bad: unreadable",
	}
	if !slices.Equal(got, want) {
		t.Errorf("pending =\n%q\nwant\n%q", got, want)
	}
	f.wantRequests(map[string]int{
		"list clusters/ 200": 1, "list machines/ 200": 1, "list configmaps/ 200": 1,
		"get clusters/c1 200": 1, "get machines/m-gone 404": 1,
	})
}
