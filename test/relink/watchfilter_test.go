package relinksuite

import (
	"fmt"
	"testing"
	"time"

	"github.com/initlock/initlock/internal/kubeenv"
	"github.com/initlock/initlock/internal/relink"
	"github.com/initlock/initlock/pkg/initlock/capi"
)

// TestWatchFilter: with a watch filter the relinker links the objects of a
// Cluster that carries the filter label, by label or by recorded owner, and
// leaves those of another Cluster alone, with exactly one patch per linked
// object.
func TestWatchFilter(t *testing.T) {
	ns := env.Namespace(t)
	in := kubeenv.NewCluster(env.CAPIVersion, ns, "in")
	in.SetLabels(map[string]string{capi.WatchFilterLabel: "team-a"})
	in = create(t, restored(t, in))
	create(t, restored(t, kubeenv.NewCluster(env.CAPIVersion, ns, "out")))
	ms := create(t, restored(t, machineGroup("MachineSet", ns, "in", "ms-0")))
	create(t, restored(t, machineGroup("MachineSet", ns, "out", "ms-1")))
	create(t, restoredConfigMap(t, ns, "in-by-label", "in", controllerOwner("MachineSet", "ms-0")))
	create(t, restoredConfigMap(t, ns, "in-by-owner", "other", clusterOwner("in")))
	create(t, restoredConfigMap(t, ns, "out-by-label", "out", controllerOwner("MachineSet", "ms-1")))
	create(t, restoredConfigMap(t, ns, "out-by-owner", "", clusterOwner("out")))

	h := start(t, ns, relink.Options{WatchFilter: "team-a", MinBackoff: time.Hour})
	kubeenv.Eventually(t, 10*time.Second, linked(t, configMapGVK, ns, "in-by-label", refTo(ms, true)))
	kubeenv.Eventually(t, 10*time.Second, linked(t, configMapGVK, ns, "in-by-owner", refTo(in, false)))
	kubeenv.Consistently(t, 2*time.Second, func() error {
		if w := h.objectWrites(); w != 2 {
			return fmt.Errorf("%d writes, want the two patches of Cluster in's objects:\n%s", w, h.rm.Counter)
		}
		return nil
	})
}
