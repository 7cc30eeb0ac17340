package chaos_test

import (
	"reflect"
	"testing"

	"github.com/initlock/initlock/internal/chaos"
	"github.com/initlock/initlock/internal/kubeenv/wire"
)

// TestCheckerIdentity: a grant is to one Machine incarnation in one Cluster
// incarnation, by UID. An acquisition for objects that are gone opens no
// hold; a hold survives a Cluster restored from an older backup only if the
// restored register names its Machine.
func TestCheckerIdentity(t *testing.T) {
	grantOf := func(machine string) *wire.Grant {
		return wire.GrantFrom(map[string]string{wire.GrantAnnotation: `{"machineName":"` + machine + `","token":"t1"}`})
	}
	a1 := chaos.Incarnation{Cluster: "k1", Machine: "a1"}
	b1 := chaos.Incarnation{Cluster: "k1", Machine: "b1"}
	setup := func(c *chaos.Checker) {
		c.ClusterCreated("c1", "k1", nil)
		c.MachineCreated("a", "a1")
		c.MachineCreated("b", "b1")
	}
	restoreOld := func(c *chaos.Checker, g *wire.Grant) {
		c.ClusterDeleting("c1")
		c.ClusterCreated("c1", "k2", g)
	}
	for _, tc := range []struct {
		name      string
		steps     func(c *chaos.Checker)
		want      []int
		wantGone  int
		wantKept  int
		wantEnded int
	}{
		{"a stale view of a re-created machine opens no hold", func(c *chaos.Checker) {
			c.MachineDeleting("driver", "c1", "a")
			c.MachineGone("c1", "a")
			c.MachineCreated("a", "a2")
			c.Acquired("bc", "c1", "a", c.Epoch("a"), a1)
			c.Acquired("bc", "c1", "b", c.Epoch("b"), b1)
		}, nil, 1, 0, 0},
		{"the live machine holds", func(c *chaos.Checker) {
			c.Acquired("bc", "c1", "a", c.Epoch("a"), a1)
			c.Acquired("bc", "c1", "b", c.Epoch("b"), b1)
		}, []int{chaos.InvNoOverlap}, 0, 0, 0},
		{"a cluster that is gone opens no hold", func(c *chaos.Checker) {
			c.ClusterDeleting("c1")
			c.Acquired("bc", "c1", "a", c.Epoch("a"), a1)
		}, nil, 1, 0, 0},
		{"the restored register names the holder", func(c *chaos.Checker) {
			c.Acquired("bc", "c1", "a", c.Epoch("a"), a1)
			restoreOld(c, grantOf("a"))
			c.Acquired("bc", "c1", "b", c.Epoch("b"), chaos.Incarnation{Cluster: "k2", Machine: "b1"})
		}, []int{chaos.InvNoOverlap}, 0, 1, 0},
		{"the restored register names another machine", func(c *chaos.Checker) {
			c.Acquired("bc", "c1", "a", c.Epoch("a"), a1)
			restoreOld(c, grantOf("b"))
			c.Acquired("bc", "c1", "b", c.Epoch("b"), chaos.Incarnation{Cluster: "k2", Machine: "b1"})
		}, nil, 0, 0, 1},
		{"the backup had no register", func(c *chaos.Checker) {
			c.Acquired("bc", "c1", "a", c.Epoch("a"), a1)
			restoreOld(c, nil)
			c.Acquired("bc", "c1", "b", c.Epoch("b"), chaos.Incarnation{Cluster: "k2", Machine: "b1"})
		}, nil, 0, 0, 1},
		{"the old incarnation's view after the restore", func(c *chaos.Checker) {
			restoreOld(c, nil)
			c.Acquired("bc", "c1", "a", c.Epoch("a"), a1)
			c.Acquired("bc", "c1", "b", c.Epoch("b"), chaos.Incarnation{Cluster: "k2", Machine: "b1"})
		}, nil, 1, 0, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := chaos.NewChecker(chaos.NewHistory())
			setup(c)
			tc.steps(c)
			if got := invariants(c.Violations()); !reflect.DeepEqual(got, tc.want) {
				t.Fatalf("violations %v, want invariants %v", c.Violations(), tc.want)
			}
			n := c.Counts()
			if n.AcquiredGone != tc.wantGone || n.HoldsKept != tc.wantKept || n.HoldsEnded != tc.wantEnded {
				t.Fatalf("acquired for gone objects %d, holds kept %d, ended %d; want %d, %d, %d",
					n.AcquiredGone, n.HoldsKept, n.HoldsEnded, tc.wantGone, tc.wantKept, tc.wantEnded)
			}
		})
	}
}

// TestCheckerStaleView: a call made with an object older than the watcher's
// latest version of it counts as behind.
func TestCheckerStaleView(t *testing.T) {
	c := chaos.NewChecker(chaos.NewHistory())
	c.Observe(chaos.Observed{Kind: chaos.KindCluster, Type: "ADDED", Name: "c1", RV: 10})
	c.Observe(chaos.Observed{Kind: chaos.KindMachine, Type: "ADDED", Name: "a", RV: 11})
	c.StaleView("c1", 10, "a", 11)
	c.Observe(chaos.Observed{Kind: chaos.KindCluster, Type: "MODIFIED", Name: "c1", RV: 12})
	c.StaleView("c1", 10, "a", 11)
	if n := c.Counts(); n.StaleViews != 2 || n.StaleBehind != 1 {
		t.Fatalf("stale views %d, behind %d; want 2, 1", n.StaleViews, n.StaleBehind)
	}
}
