package manager_test

import (
	"fmt"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/initlock/initlock/internal/kubeenv"
	"github.com/initlock/initlock/pkg/initlock/capi"
)

// TestWatchFilter runs the manager with a watch filter: it adopts the
// unowned lock of a Cluster with the filter label and collects a labelled
// orphan, and writes nothing to the locks of a Cluster with another value,
// of an unlabelled Cluster, or to an unlabelled orphan.
func TestWatchFilter(t *testing.T) {
	ns := env.Namespace(t)
	label := func(value string) func(*unstructured.Unstructured) {
		return func(u *unstructured.Unstructured) { u.SetLabels(map[string]string{capi.WatchFilterLabel: value}) }
	}
	clusters := map[string]*unstructured.Unstructured{}
	for _, c := range []struct {
		name   string
		mutate []func(*unstructured.Unstructured)
	}{{"in", []func(*unstructured.Unstructured){label("team-a")}}, {"other", []func(*unstructured.Unstructured){label("team-b")}}, {"unlabelled", nil}} {
		create(t, lockFor(ns, c.name, c.name+"-cp-0", nil))
		createMachine(t, v, ns, c.name, c.name+"-cp-0")
		clusters[c.name] = createCluster(t, v, ns, c.name, c.mutate...)
	}
	orphan := lockFor(ns, "orphan-in", "orphan-in-cp-0", nil)
	orphan.Labels[capi.WatchFilterLabel] = "team-a"
	create(t, orphan)
	create(t, lockFor(ns, "orphan-out", "orphan-out-cp-0", nil))

	opts := testOptions(ns)
	opts.WatchFilter = "team-a"
	opts.OrphanGrace, opts.OrphanSettle = time.Second, 0
	rm := startManager(t, env.Config, opts)
	kubeenv.Eventually(t, 30*time.Second, func() error {
		cm, err := getLock(t, ns, "in")
		if err != nil {
			return err
		}
		return ownedBy(cm, clusters["in"])
	})
	kubeenv.Eventually(t, 30*time.Second, lockGone(t, ns, "orphan-in"))
	kubeenv.Consistently(t, 2*time.Second, func() error {
		for _, name := range []string{"other", "unlabelled", "orphan-out"} {
			cm, err := getLock(t, ns, name)
			if err != nil {
				return err
			}
			if len(cm.OwnerReferences) > 0 || len(cm.Annotations) > 0 {
				return fmt.Errorf("lock %s outside the watch filter was written: %v %v", name, cm.OwnerReferences, cm.Annotations)
			}
		}
		return nil
	})
	// in: one patch; orphan-in: mark and delete.
	if n := rm.Counter.Of("configmaps", ns).Writes(); n != 3 {
		t.Fatalf("configmap writes = %d, want 3:\n%s", n, rm.Counter)
	}
}
