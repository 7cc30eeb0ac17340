package chaos_test

import (
	"reflect"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"

	"github.com/initlock/initlock/internal/chaos"
	"github.com/initlock/initlock/internal/kubeenv/wire"
)

// TestCheckerOverlap: the checker catches two machines holding one lock,
// and accepts every way a hold legitimately ends. A grant is to one
// Machine incarnation in one Cluster incarnation, by UID: an acquisition
// for objects that are gone opens no hold; a hold survives a Cluster
// restored from an older backup only if the restored register names its
// Machine.
func TestCheckerOverlap(t *testing.T) {
	grantOf := func(machine string) *wire.Grant {
		return wire.GrantFrom(map[string]string{wire.GrantAnnotation: `{"machineName":"` + machine + `","token":"t1"}`})
	}
	a1 := chaos.Incarnation{Cluster: "k1", Machine: "a1"}
	b1 := chaos.Incarnation{Cluster: "k1", Machine: "b1"}
	// identity rows start with c1, a and b created, by UID.
	identity := func(steps func(c *chaos.Checker)) func(c *chaos.Checker) {
		return func(c *chaos.Checker) {
			c.ClusterCreated("c1", "k1", nil)
			c.MachineCreated("a", "a1")
			c.MachineCreated("b", "b1")
			steps(c)
		}
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
		{"second machine while held", func(c *chaos.Checker) {
			c.Acquired("bc", "c1", "a", c.Epoch("a"), chaos.Incarnation{})
			c.Acquired("bc", "c1", "b", c.Epoch("b"), chaos.Incarnation{})
		}, []int{chaos.InvNoOverlap}, 0, 0, 0},
		{"re-lock by the holder", func(c *chaos.Checker) {
			c.Acquired("bc", "c1", "a", c.Epoch("a"), chaos.Incarnation{})
			c.Acquired("bc", "c1", "a", c.Epoch("a"), chaos.Incarnation{})
		}, nil, 0, 0, 0},
		{"after unlock", func(c *chaos.Checker) {
			c.Acquired("bc", "c1", "a", c.Epoch("a"), chaos.Incarnation{})
			c.Unlocking("init", "c1", "a")
			c.Acquired("bc", "c1", "b", c.Epoch("b"), chaos.Incarnation{})
		}, nil, 0, 0, 0},
		{"after the holder's deletion", func(c *chaos.Checker) {
			c.Acquired("bc", "c1", "a", c.Epoch("a"), chaos.Incarnation{})
			c.MachineDeleting("driver", "c1", "a")
			c.MachineGone("c1", "a")
			c.Acquired("bc", "c1", "b", c.Epoch("b"), chaos.Incarnation{})
		}, nil, 0, 0, 0},
		{"after init", func(c *chaos.Checker) {
			c.Acquired("bc", "c1", "a", c.Epoch("a"), chaos.Incarnation{})
			c.FinishInit("init", "c1", "a")
			c.Acquired("bc", "c1", "b", c.Epoch("b"), chaos.Incarnation{})
		}, nil, 0, 0, 0},
		{"machine deleted while its Lock ran", func(c *chaos.Checker) {
			epoch := c.Epoch("a")
			c.MachineDeleting("driver", "c1", "a")
			c.Acquired("bc", "c1", "a", epoch, chaos.Incarnation{})
			c.Acquired("bc", "c1", "b", c.Epoch("b"), chaos.Incarnation{})
		}, nil, 0, 0, 0},
		{"machine being deleted acquires", func(c *chaos.Checker) {
			c.MachineDeleting("driver", "c1", "a")
			c.Acquired("bc", "c1", "a", c.Epoch("a"), chaos.Incarnation{})
			c.Acquired("bc", "c1", "b", c.Epoch("b"), chaos.Incarnation{})
		}, nil, 0, 0, 0},
		{"upstream hold", func(c *chaos.Checker) {
			c.UpstreamHold("c1", "a")
			c.Acquired("bc", "c1", "b", c.Epoch("b"), chaos.Incarnation{})
		}, []int{chaos.InvNoOverlap}, 0, 0, 0},
		{"upstream lock lost", func(c *chaos.Checker) {
			c.UpstreamHold("c1", "a")
			c.LockLost("driver", "c1")
			c.Acquired("bc", "c1", "b", c.Epoch("b"), chaos.Incarnation{})
		}, nil, 0, 0, 0},
		{"healed upstream lock lost", func(c *chaos.Checker) {
			c.UpstreamHold("c1", "a")
			c.Acquired("bc", "c1", "a", c.Epoch("a"), chaos.Incarnation{})
			c.LockLost("driver", "c1")
			c.Acquired("bc", "c1", "b", c.Epoch("b"), chaos.Incarnation{})
		}, []int{chaos.InvNoOverlap}, 0, 0, 0},
		{"another cluster", func(c *chaos.Checker) {
			c.Acquired("bc", "c1", "a", c.Epoch("a"), chaos.Incarnation{})
			c.Acquired("bc", "c2", "b", c.Epoch("b"), chaos.Incarnation{})
		}, nil, 0, 0, 0},
		{"a stale view of a re-created machine opens no hold", identity(func(c *chaos.Checker) {
			c.MachineDeleting("driver", "c1", "a")
			c.MachineGone("c1", "a")
			c.MachineCreated("a", "a2")
			c.Acquired("bc", "c1", "a", c.Epoch("a"), a1)
			c.Acquired("bc", "c1", "b", c.Epoch("b"), b1)
		}), nil, 1, 0, 0},
		{"the live machine holds", identity(func(c *chaos.Checker) {
			c.Acquired("bc", "c1", "a", c.Epoch("a"), a1)
			c.Acquired("bc", "c1", "b", c.Epoch("b"), b1)
		}), []int{chaos.InvNoOverlap}, 0, 0, 0},
		{"a cluster that is gone opens no hold", identity(func(c *chaos.Checker) {
			c.ClusterDeleting("c1")
			c.Acquired("bc", "c1", "a", c.Epoch("a"), a1)
		}), nil, 1, 0, 0},
		{"the restored register names the holder", identity(func(c *chaos.Checker) {
			c.Acquired("bc", "c1", "a", c.Epoch("a"), a1)
			restoreOld(c, grantOf("a"))
			c.Acquired("bc", "c1", "b", c.Epoch("b"), chaos.Incarnation{Cluster: "k2", Machine: "b1"})
		}), []int{chaos.InvNoOverlap}, 0, 1, 0},
		{"the restored register names another machine", identity(func(c *chaos.Checker) {
			c.Acquired("bc", "c1", "a", c.Epoch("a"), a1)
			restoreOld(c, grantOf("b"))
			c.Acquired("bc", "c1", "b", c.Epoch("b"), chaos.Incarnation{Cluster: "k2", Machine: "b1"})
		}), nil, 0, 0, 1},
		{"the backup had no register", identity(func(c *chaos.Checker) {
			c.Acquired("bc", "c1", "a", c.Epoch("a"), a1)
			restoreOld(c, nil)
			c.Acquired("bc", "c1", "b", c.Epoch("b"), chaos.Incarnation{Cluster: "k2", Machine: "b1"})
		}), nil, 0, 0, 1},
		{"the old incarnation's view after the restore", identity(func(c *chaos.Checker) {
			restoreOld(c, nil)
			c.Acquired("bc", "c1", "a", c.Epoch("a"), a1)
			c.Acquired("bc", "c1", "b", c.Epoch("b"), chaos.Incarnation{Cluster: "k2", Machine: "b1"})
		}), nil, 1, 0, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := chaos.NewChecker(chaos.NewHistory())
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

// TestCheckerUnsafeDelete: lock deletions are judged on the state of the
// Cluster and the holder at the deletion's revision, whatever order the
// three watches deliver their events in.
func TestCheckerUnsafeDelete(t *testing.T) {
	const lockUID = types.UID("lock-1")
	cluster := func(rv int64, typ watch.EventType, initialised bool) chaos.Observed {
		return chaos.Observed{Kind: chaos.KindCluster, Type: typ, Name: "c1", UID: "cl", RV: rv, Initialized: initialised}
	}
	machine := func(rv int64, typ watch.EventType) chaos.Observed {
		return chaos.Observed{Kind: chaos.KindMachine, Type: typ, Name: "m1", UID: "m", RV: rv}
	}
	lock := func(rv int64, typ watch.EventType) chaos.Observed {
		return chaos.Observed{Kind: chaos.KindConfigMap, Type: typ, Name: "c1-lock", UID: lockUID, RV: rv, LockOf: "c1", Holder: "m1"}
	}
	// The holder deleted, then created again under its name (a new UID),
	// before or after the manager's release mark.
	// The watcher sees it an hour into the run: after any read the test
	// makes (readSince).
	again := func(rv int64) chaos.Observed {
		return chaos.Observed{Kind: chaos.KindMachine, Type: watch.Added, Name: "m1", UID: "m-again", RV: rv, Seen: time.Hour}
	}
	// The same, seen a nanosecond into the run: before any read.
	againEarly := func(rv int64) chaos.Observed {
		o := again(rv)
		o.Seen = time.Nanosecond
		return o
	}
	marked := func(rv int64, typ watch.EventType) chaos.Observed {
		o := lock(rv, typ)
		o.Marked = true
		return o
	}
	granted := func(rv int64) chaos.Observed {
		o := cluster(rv, watch.Added, false)
		o.Grant = `{"machineName":"m1","token":"t1"}`
		return o
	}
	byManager := chaos.Deletion{Actor: "mgr-1", Name: "c1-lock", UID: lockUID, Code: 200}
	// readSince: the deleting replica is mgr-2, which read m1 in a list
	// before its delete (the test's reads are made by mgr-2 only).
	readSince := chaos.Deletion{Actor: "mgr-2", Name: "c1-lock", UID: lockUID, Code: 200}
	for _, tc := range []struct {
		name     string
		events   []chaos.Observed
		deletion *chaos.Deletion
		want     []int
	}{
		{"manager deletes a held lock", []chaos.Observed{
			cluster(1, watch.Added, false), machine(2, watch.Added), lock(3, watch.Added), lock(5, watch.Deleted),
		}, &byManager, []int{chaos.InvNoUnsafeDelete}},
		{"holder back after the manager's release mark: the stated window", []chaos.Observed{
			cluster(1, watch.Added, false), machine(2, watch.Added), lock(3, watch.Added), machine(4, watch.Deleted),
			marked(5, watch.Modified), again(6), marked(7, watch.Deleted),
		}, &byManager, nil},
		{"holder back after the mark, read by the deleting replica since", []chaos.Observed{
			cluster(1, watch.Added, false), machine(2, watch.Added), lock(3, watch.Added), machine(4, watch.Deleted),
			marked(5, watch.Modified), againEarly(6), marked(7, watch.Deleted),
		}, &readSince, []int{chaos.InvNoUnsafeDelete}},
		{"holder back after the mark, read by another replica since", []chaos.Observed{
			cluster(1, watch.Added, false), machine(2, watch.Added), lock(3, watch.Added), machine(4, watch.Deleted),
			marked(5, watch.Modified), againEarly(6), marked(7, watch.Deleted),
		}, &byManager, nil},
		{"holder back before the manager's release mark", []chaos.Observed{
			cluster(1, watch.Added, false), machine(2, watch.Added), lock(3, watch.Added), machine(4, watch.Deleted),
			again(5), marked(6, watch.Modified), marked(7, watch.Deleted),
		}, &byManager, []int{chaos.InvNoUnsafeDelete}},
		{"holder back after a mark taken off since", []chaos.Observed{
			cluster(1, watch.Added, false), machine(2, watch.Added), lock(3, watch.Added), machine(4, watch.Deleted),
			marked(5, watch.Modified), lock(6, watch.Modified), again(7), marked(8, watch.Modified), marked(9, watch.Deleted),
		}, &byManager, []int{chaos.InvNoUnsafeDelete}},
		{"manager releases after init", []chaos.Observed{
			cluster(1, watch.Added, false), machine(2, watch.Added), lock(3, watch.Added), cluster(4, watch.Modified, true), lock(5, watch.Deleted),
		}, &byManager, nil},
		{"init stays true across a restore", []chaos.Observed{
			cluster(1, watch.Added, true), cluster(2, watch.Deleted, true), cluster(3, watch.Added, false),
			machine(4, watch.Added), lock(5, watch.Added), lock(6, watch.Deleted),
		}, &byManager, nil},
		{"manager collects an orphan", []chaos.Observed{
			cluster(1, watch.Added, false), machine(2, watch.Added), lock(3, watch.Added), cluster(4, watch.Deleted, false),
			machine(5, watch.Deleted), lock(6, watch.Deleted),
		}, &byManager, nil},
		// The lock watch runs ahead: the machine's deletion (rv 4) comes
		// after the lock's (rv 5), and the cluster's events come last.
		{"watches deliver out of order", []chaos.Observed{
			lock(3, watch.Added), lock(5, watch.Deleted), machine(2, watch.Added), machine(4, watch.Deleted),
			cluster(1, watch.Added, false), cluster(6, watch.Modified, false),
		}, &byManager, nil},
		{"holder's own unlock", []chaos.Observed{
			cluster(1, watch.Added, false), machine(2, watch.Added), lock(3, watch.Added), lock(5, watch.Deleted),
		}, &chaos.Deletion{Actor: "init/m1", Op: "unlock", Name: "c1-lock", UID: lockUID, Code: 200}, nil},
		{"deleted by a Lock call", []chaos.Observed{
			cluster(1, watch.Added, false), machine(2, watch.Added), lock(3, watch.Added), lock(5, watch.Deleted),
		}, &chaos.Deletion{Actor: "bc-1", Op: "lock", Name: "c1-lock", UID: lockUID, Code: 200}, []int{chaos.InvNoUnsafeDelete}},
		{"a Lock withdraws the lock it wrote for its own machine", []chaos.Observed{
			cluster(1, watch.Added, false), machine(2, watch.Added), lock(3, watch.Added), lock(5, watch.Deleted),
		}, &chaos.Deletion{Actor: "bc-1", Op: "lock", Caller: "m1", Name: "c1-lock", UID: lockUID, Code: 200}, nil},
		{"a Lock deletes its machine's granted lock", []chaos.Observed{
			granted(1), machine(2, watch.Added), lock(3, watch.Added), lock(5, watch.Deleted),
		}, &chaos.Deletion{Actor: "bc-1", Op: "lock", Caller: "m1", Name: "c1-lock", UID: lockUID, Code: 200}, []int{chaos.InvNoUnsafeDelete}},
		{"garbage collector or operator", []chaos.Observed{
			cluster(1, watch.Added, false), machine(2, watch.Added), lock(3, watch.Added), lock(5, watch.Deleted),
		}, nil, nil},
		{"failed delete", []chaos.Observed{
			cluster(1, watch.Added, false), machine(2, watch.Added), lock(3, watch.Added), lock(5, watch.Deleted),
		}, &chaos.Deletion{Actor: "mgr-1", Name: "c1-lock", UID: lockUID, Code: 409}, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := chaos.NewChecker(chaos.NewHistory())
			for k := range 3 {
				c.StartRevision(k, 0)
			}
			for _, o := range tc.events {
				c.Observe(o)
			}
			c.MachineRead("mgr-2", "")
			if tc.deletion != nil {
				c.Deleted(*tc.deletion)
			}
			c.Drain()
			if got := invariants(c.Violations()); !reflect.DeepEqual(got, tc.want) {
				t.Fatalf("violations %v, want invariants %v", c.Violations(), tc.want)
			}
		})
	}
}

// TestCheckerForeign: any change to a planted ConfigMap is a violation.
func TestCheckerForeign(t *testing.T) {
	c := chaos.NewChecker(chaos.NewHistory())
	c.PlantForeign(chaos.ForeignConfigMap{Name: "app", UID: "u1", ResourceVersion: "7"})
	c.Observe(chaos.Observed{Kind: chaos.KindConfigMap, Type: watch.Added, Name: "app", UID: "u1", RV: 7})
	if v := c.Violations(); len(v) != 0 {
		t.Fatalf("planting is a violation: %v", v)
	}
	c.Observe(chaos.Observed{Kind: chaos.KindConfigMap, Type: watch.Modified, Name: "app", UID: "u1", RV: 9})
	v := c.Violations()
	if len(v) != 1 || v[0].Invariant != chaos.InvForeignUntouched || !strings.Contains(v[0].Message, "app") {
		t.Fatalf("violations %v, want one of invariant 3 naming app", v)
	}
}

// TestGenerate: a seed always gives the same plan, and different seeds
// different plans (TestPlansExerciseEveryClass checks the plans' shape).
func TestGenerate(t *testing.T) {
	a, b := chaos.Generate(42, chaos.SizeShort), chaos.Generate(42, chaos.SizeShort)
	if !reflect.DeepEqual(a, b) {
		t.Fatalf("seed 42 gave two plans:\n%s\n%s", a, b)
	}
	if c := chaos.Generate(43, chaos.SizeShort); reflect.DeepEqual(a, c) {
		t.Fatalf("seeds 42 and 43 gave the same plan")
	}
}

func invariants(vs []chaos.Violation) []int {
	var out []int
	for _, v := range vs {
		out = append(out, v.Invariant)
	}
	return out
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
