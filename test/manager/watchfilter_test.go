package managersuite_test

import (
	"fmt"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/initlock/initlock/internal/kubeenv"
	"github.com/initlock/initlock/pkg/initlock/capi"
)

// TestWatchFilter runs the manager with a watch filter: it adopts the
// unowned lock of a Cluster with the filter label, and not the locks of a
// Cluster with another value or of an unlabelled Cluster. The filter
// decides what the manager takes care of, never what it lets go: an
// orphan is collected and the lock of a gone holder released, with the
// label or without.
func TestWatchFilter(t *testing.T) {
	ns := env.Namespace(t)
	clusters := map[string]*unstructured.Unstructured{}
	for _, c := range []struct{ name, label string }{{"in", "team-a"}, {"other", "team-b"}, {"unlabelled", ""}} {
		create(t, lockFor(ns, c.name, c.name+"-cp-0", nil))
		createMachine(t, v, ns, c.name, c.name+"-cp-0")
		clusters[c.name] = createCluster(t, v, ns, c.name, func(u *unstructured.Unstructured) {
			if c.label != "" {
				u.SetLabels(map[string]string{capi.WatchFilterLabel: c.label})
			}
		})
	}
	orphan := lockFor(ns, "orphan-in", "orphan-in-cp-0", nil)
	orphan.Labels[capi.WatchFilterLabel] = "team-a"
	create(t, orphan)
	create(t, lockFor(ns, "orphan-out", "orphan-out-cp-0", nil))
	// An unlabelled Cluster whose lock names a Machine that is gone: the
	// manager was down while the holder went (stock CABPK's own release
	// of it is refused by the lock guard).
	stale := createCluster(t, v, ns, "stale-out")
	create(t, lockFor(ns, "stale-out", "stale-out-cp-0", stale))

	opts := testOptions(ns)
	opts.WatchFilter = "team-a"
	opts.OrphanGrace, opts.OrphanSettle = time.Second, 0
	rm := startManager(t, env.Config, opts)
	kubeenv.Eventually(t, 30*time.Second, lockIs(t, ns, "in", ownedBy(clusters["in"])))
	for _, gone := range []string{"orphan-in", "orphan-out", "stale-out"} {
		kubeenv.Eventually(t, 30*time.Second, lockGone(t, ns, gone))
	}
	kubeenv.Consistently(t, 2*time.Second, func() error {
		for _, name := range []string{"other", "unlabelled"} {
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
	// in: one patch; each orphan: its absence marked, the release mark,
	// the delete; stale-out: the release mark, the delete.
	wantWrites(t, rm, "configmaps", ns, 9, "")
}
