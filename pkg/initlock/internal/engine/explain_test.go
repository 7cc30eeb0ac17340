package engine_test

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/initlock/initlock/pkg/initlock/internal/engine"
)

// TestExplain checks that every write a keeper makes and every wait it
// reports is explained in words of its own (not the bare value), naming
// the Machine or the time the decision turns on.
func TestExplain(t *testing.T) {
	absent := t0.Add(-time.Hour)
	orphan := engine.Observation{Lock: &engine.Lock{ClusterAbsentSince: &absent}}
	policy := engine.Policy{OrphanGrace: 10 * time.Minute}
	cases := []struct {
		name string
		o    engine.Observation
		d    engine.Decision
		want string
	}{
		{"adopt, no owner", engine.Observation{}, engine.Decision{Action: engine.ActionAdopt, Owner: engine.OwnerMissing}, "no ownerReference"},
		{"adopt, old UID", engine.Observation{}, engine.Decision{Action: engine.ActionAdopt, Owner: engine.OwnerStaleUID}, "old UID"},
		{"adopt, another Cluster", engine.Observation{}, engine.Decision{Action: engine.ActionAdopt, Owner: engine.OwnerWrongCluster}, "another Cluster"},
		{"adopt, absent mark", engine.Observation{}, engine.Decision{Action: engine.ActionAdopt, Owner: engine.OwnerOK}, "cluster-absent mark"},
		{"unmark, move", engine.Observation{Lock: &engine.Lock{MoveMark: true}}, engine.Decision{Action: engine.ActionUnmark}, "delete-for-move"},
		{"unmark, release", engine.Observation{Lock: &engine.Lock{}}, engine.Decision{Action: engine.ActionUnmark}, "release mark left"},
		{"release, deleting", engine.Observation{}, engine.Decision{Action: engine.ActionRelease, Reason: engine.ReasonClusterDeleting}, "being deleted"},
		{"release, holder gone", engine.Observation{}, engine.Decision{Action: engine.ActionRelease, Reason: engine.ReasonHolderGone, Holder: "m1"}, `"m1" does not exist`},
		{"release, initialised", engine.Observation{}, engine.Decision{Action: engine.ActionRelease, Reason: engine.ReasonInitialized}, "control plane initialised"},
		{"mark orphan", engine.Observation{}, engine.Decision{Action: engine.ActionMarkOrphan, Unmark: true}, "dropping the mark"},
		{"collect", orphan, engine.Decision{Action: engine.ActionCollect}, absent.Format(time.RFC3339)},
		{"paused", engine.Observation{}, engine.Decision{Wait: engine.WaitPaused}, "paused"},
		{"settle", engine.Observation{}, engine.Decision{Wait: engine.WaitSettle, WaitUntil: t0}, t0.Format(time.RFC3339)},
		{"grace", orphan, engine.Decision{Wait: engine.WaitGrace, WaitUntil: t0}, t0.Format(time.RFC3339)},
		{"holder of a deleting Cluster", engine.Observation{Cluster: &engine.Cluster{}}, engine.Decision{Wait: engine.WaitHolder, Holder: "m1"}, `"m1", which the lock`},
		{"holder of a missing Cluster", orphan, engine.Decision{Wait: engine.WaitHolder, Holder: "m1"}, `holder machine "m1" exists`},
		{"holder restore", engine.Observation{}, engine.Decision{Wait: engine.WaitHolderRestore, Holder: "m1", WaitUntil: t0}, t0.Format(time.RFC3339)},
		{"lock recreated", engine.Observation{}, engine.Decision{Wait: engine.WaitLockRecreated, Holder: "m1"}, `"m1" holds the grant`},
		{"take over", engine.Observation{}, engine.Decision{Wait: engine.WaitTakeOver, Holder: "m1"}, "hands the lock"},
		{"deleting", engine.Observation{}, engine.Decision{Wait: engine.WaitDeleting}, "finalizer"},
		{"person, an error", engine.Observation{}, engine.Decision{Wait: engine.WaitPerson, Err: errors.New("record is not JSON")}, "record is not JSON"},
		{"person, a conflict that also adopts", engine.Observation{}, engine.Decision{Wait: engine.WaitPerson, Action: engine.ActionAdopt, Owner: engine.OwnerMissing}, "two different existing machines"},
	}
	for _, c := range cases {
		got := engine.Explain(c.o, c.d, policy)
		if !strings.Contains(got, c.want) {
			t.Errorf("%s: Explain = %q, want it to contain %q", c.name, got, c.want)
		}
	}
}
