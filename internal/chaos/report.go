package chaos

import (
	"fmt"
	"maps"
	"reflect"
	"slices"
	"strings"
	"time"

	"github.com/initlock/initlock/internal/kubeenv/faults"
)

// Summary is a one-line description of a result.
func (r *Result) Summary() string {
	c := r.Counts
	var acts []string
	for _, k := range slices.Sorted(maps.Keys(r.Actions)) {
		acts = append(acts, fmt.Sprintf("%s=%d", k, r.Actions[k]))
	}
	return fmt.Sprintf("seed %d: %d violations; %d Lock calls, %d grants, %d re-locks, %d refused, %d errors (+%d paused, %d not a lock); %d unlocks; %d inits; "+
		"lock deletes: manager %d, unlock %d, other %d; faults client %d/%d manager %d/%d; "+
		"stale views %d (%d behind, %d acquired for a gone UID), late writes %d, lagged manager watches %d; manager starts %d kills %d; actions %s (skipped %d); settled in %s; %s",
		r.Plan.Seed, len(r.Violations), c.LockCalls, c.Grants, c.ReLocks, c.Refused, c.LockErrors, c.Paused, c.NotALock, c.UnlockCalls, c.Inits,
		c.DeletesByManager, c.DeletesByUnlock, c.DeletesExternal,
		r.ClientFaults.Injected(), r.ClientFaults.Requests, r.ManagerFaults.Injected(), r.ManagerFaults.Requests,
		c.StaleViews, c.StaleBehind, c.AcquiredGone, r.ClientFaults.ByClass[faults.LateWrite]+r.ManagerFaults.ByClass[faults.LateWrite], r.ManagerFaults.LaggedWatches,
		r.ManagerStarts, r.ManagerKills, strings.Join(acts, " "), r.Skipped, r.Settle.Round(time.Millisecond), r.Elapsed.Round(time.Millisecond))
}

// Totals sum the results of many scenarios.
type Totals struct {
	Scenarios, Failed, Violations int
	Counts                        Counts
	ClientFaults, ManagerFaults   FaultStats
	CacheFaults                   FaultStats
	// Faults counts the faults injected, by class of the catalogue;
	// Planned the scenarios whose plans enabled each class.
	Faults, Planned             faults.Tally
	ManagerStarts, ManagerKills int
	Actions                     map[faults.Class]int
	Restores, Hits              map[string]int
	// Lagging counts the scenarios whose managers' watches lagged.
	Lagging int
	Elapsed time.Duration
}

// Add adds a result.
func (t *Totals) Add(r *Result) {
	if t.Actions == nil {
		t.Actions, t.Restores, t.Hits = map[faults.Class]int{}, map[string]int{}, map[string]int{}
	}
	t.Scenarios++
	if r.Failed() {
		t.Failed++
	}
	t.Violations += len(r.Violations)
	t.Counts = t.Counts.Add(r.Counts)
	t.ClientFaults = t.ClientFaults.Add(r.ClientFaults)
	t.ManagerFaults = t.ManagerFaults.Add(r.ManagerFaults)
	t.CacheFaults = t.CacheFaults.Add(r.CacheFaults)
	t.Faults = t.Faults.Add(r.Faults())
	for _, c := range r.Plan.Planned() {
		t.Planned = t.Planned.Add(faults.Tally{c: 1})
	}
	if r.Plan.ManagerFaults.WatchLag > 0 {
		t.Lagging++
	}
	addTo(t.Hits, r.Hits)
	t.ManagerStarts += r.ManagerStarts
	t.ManagerKills += r.ManagerKills
	addTo(t.Actions, r.Actions)
	addTo(t.Restores, r.Restores)
	t.Elapsed += r.Elapsed
}

// addTo adds the counts of src to those of dst.
func addTo[K comparable](dst, src map[K]int) {
	for k, v := range src {
		dst[k] += v
	}
}

func (t *Totals) String() string {
	c := t.Counts
	var b strings.Builder
	fmt.Fprintf(&b, "%d scenarios (%d failed), %d violations, %s\n", t.Scenarios, t.Failed, t.Violations, t.Elapsed.Round(time.Second))
	fmt.Fprintf(&b, "  fault classes injected: %s\n", t.Faults.Format(faults.Chaos))
	for _, c := range t.Faults.Missing(faults.Chaos) {
		fmt.Fprintf(&b, "  fault class %s not exercised (enabled by %d plans)\n", c, t.Planned[c])
	}
	fmt.Fprintf(&b, "  Lock calls %d: grants %d, re-locks %d, refused %d, errors %d (paused %d, not a lock %d), acquired by a machine being deleted %d, "+
		"acquired for a machine or cluster UID gone %d\n",
		c.LockCalls, c.Grants, c.ReLocks, c.Refused, c.LockErrors+c.Paused+c.NotALock, c.Paused, c.NotALock, c.AcquiredDeleted, c.AcquiredGone)
	fmt.Fprintf(&b, "  inits %d, failed inits unlocked %d (Unlock errors %d)\n", c.Inits, c.UnlockCalls, c.UnlockErrors)
	fmt.Fprintf(&b, "  lock deletions: by the manager %d (%d with the holder back after the release mark, the stated window), by Unlock %d, by Lock of its own ungranted lock %d, by others (garbage collector, operator, disaster) %d\n",
		c.DeletesByManager, c.DeletesInWindow, c.DeletesByUnlock, c.DeletesWithdrawn, c.DeletesExternal)
	fmt.Fprintf(&b, "  faults injected: bootstrap clients %d of %d requests, managers %d of %d\n",
		t.ClientFaults.Injected(), t.ClientFaults.Requests, t.ManagerFaults.Injected(), t.ManagerFaults.Requests)
	fmt.Fprintf(&b, "  manager processes started %d, SIGKILLed %d\n", t.ManagerStarts, t.ManagerKills)
	fmt.Fprintf(&b, "  stale caller views: %d Lock/Unlock calls with cached objects, %d of them behind the server (cache watches lagged %d)\n",
		c.StaleViews, c.StaleBehind, t.CacheFaults.LaggedWatches)
	late := t.ClientFaults.Add(t.ManagerFaults)
	fmt.Fprintf(&b, "  late writes: %d (bootstrap clients %d, managers %d), applied %d, refused by the server %d\n",
		late.ByClass[faults.LateWrite], t.ClientFaults.ByClass[faults.LateWrite], t.ManagerFaults.ByClass[faults.LateWrite],
		late.LateApplied, late.LateRejected)
	fmt.Fprintf(&b, "  machines re-created: %d (holding %d, waiting %d, initialised %d)\n", t.Actions[faults.MachineRecreated],
		t.Hits[hitKey(faults.MachineRecreated, "holding")], t.Hits[hitKey(faults.MachineRecreated, "waiting")],
		t.Hits[hitKey(faults.MachineRecreated, "initialised")])
	fmt.Fprintf(&b, "  clusters restored from an older backup: %d (copy made at setup %d, older copy %d), holds kept %d, ended %d\n",
		t.Actions[faults.ClusterRestoredOld], t.Hits[hitKey(faults.ClusterRestoredOld, hitSetupCopy)],
		t.Hits[hitKey(faults.ClusterRestoredOld, hitOlderCopy)], c.HoldsKept, c.HoldsEnded)
	fmt.Fprintf(&b, "  manager cache lag: %d manager watches lagged, in %d scenarios\n", t.ManagerFaults.LaggedWatches, t.Lagging)
	fmt.Fprintf(&b, "  relinker: %d references seen on restored add-ons, each to the right owner; %d partial restores next to an unrelated Cluster; %d relinker watches lagged\n",
		c.AddOnLinks, t.Actions[faults.SameNameOwner], t.ManagerFaults.LaggedRelinkWatches)
	b.WriteString("  actions:")
	for _, k := range slices.Sorted(maps.Keys(t.Actions)) {
		fmt.Fprintf(&b, " %s=%d", k, t.Actions[k])
	}
	b.WriteString("\n  restores:")
	for _, k := range slices.Sorted(maps.Keys(t.Restores)) {
		fmt.Fprintf(&b, " %q=%d", k, t.Restores[k])
	}
	return b.String()
}

// Counts are what a scenario did, for the summary.
type Counts struct {
	// LockCalls to Locker.Lock, and how they ended.
	LockCalls, Grants, ReLocks, Refused, LockErrors int
	// Paused and NotALock count the Lock calls refused with
	// ErrClusterPaused and ErrNotALock, which are not in LockErrors.
	Paused, NotALock int
	// Acquisitions by a Machine deleted while its Lock call ran.
	AcquiredDeleted int
	// AcquiredGone: acquisitions for a Machine or a Cluster, by UID, that
	// no longer existed when Lock returned (the caller's view was stale).
	AcquiredGone int
	// StaleViews are Lock and Unlock calls made with objects read from an
	// informer cache; StaleBehind of them had an object older than the
	// latest version the watcher had seen.
	StaleViews, StaleBehind int
	// HoldsKept and HoldsEnded count the holds of a Cluster re-created from
	// an older backup that its restored grant register named, or did not.
	HoldsKept, HoldsEnded int
	// UnlockCalls to Locker.Unlock, and their errors.
	UnlockCalls, UnlockErrors int
	// Inits completed.
	Inits int
	// LockDeletes seen by the watcher, by who made them.
	DeletesByManager, DeletesByUnlock, DeletesExternal int
	// DeletesWithdrawn are locks a Lock call deleted that it had written
	// for its own Machine, which no grant named.
	DeletesWithdrawn int
	// DeletesInWindow are the manager's deletes of a lock whose holder
	// Machine was created again after the release mark: the window
	// docs/design.md states.
	DeletesInWindow int
	// AddOnLinks are the Cluster references seen on restored add-ons, each
	// to the right owner (invariant 5).
	AddOnLinks int
}

// Add sums two Counts.
func (c Counts) Add(o Counts) Counts { return sumInts(c, o) }

// sumInts returns a plus b, int field by int field; it leaves the other
// fields as a has them.
func sumInts[T any](a, b T) T {
	va, vb := reflect.ValueOf(&a).Elem(), reflect.ValueOf(b)
	for i := range va.NumField() {
		if f := va.Field(i); f.Kind() == reflect.Int {
			f.SetInt(f.Int() + vb.Field(i).Int())
		}
	}
	return a
}
