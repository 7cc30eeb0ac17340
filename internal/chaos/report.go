package chaos

import (
	"fmt"
	"sort"
	"strings"
	"time"
)

// Summary is a one-line description of a result.
func (r *Result) Summary() string {
	c := r.Counts
	var acts []string
	for k, v := range r.Actions {
		acts = append(acts, fmt.Sprintf("%s=%d", k, v))
	}
	sort.Strings(acts)
	return fmt.Sprintf("seed %d: %d violations; %d Lock calls, %d grants, %d re-locks, %d refused, %d errors (+%d paused, %d not a lock); %d unlocks; %d inits; "+
		"lock deletes: manager %d, unlock %d, other %d; faults client %d/%d manager %d/%d; manager starts %d kills %d; actions %s (skipped %d); settled in %s; %s",
		r.Plan.Seed, len(r.Violations), c.LockCalls, c.Grants, c.ReLocks, c.Refused, c.LockErrors, c.Paused, c.NotALock, c.UnlockCalls, c.Inits,
		c.DeletesByManager, c.DeletesByUnlock, c.DeletesExternal,
		r.ClientFaults.Injected(), r.ClientFaults.Requests, r.ManagerFaults.Injected(), r.ManagerFaults.Requests,
		r.ManagerStarts, r.ManagerKills, strings.Join(acts, " "), r.Skipped, r.Settle.Round(time.Millisecond), r.Elapsed.Round(time.Millisecond))
}

// Totals sum the results of many scenarios.
type Totals struct {
	Scenarios, Failed, Violations int
	Counts                        Counts
	ClientFaults, ManagerFaults   FaultStats
	ManagerStarts, ManagerKills   int
	Actions                       map[ActionKind]int
	Restores                      map[string]int
	Elapsed                       time.Duration
}

// Add adds a result.
func (t *Totals) Add(r *Result) {
	if t.Actions == nil {
		t.Actions, t.Restores = map[ActionKind]int{}, map[string]int{}
	}
	t.Scenarios++
	if r.Failed() {
		t.Failed++
	}
	t.Violations += len(r.Violations)
	t.Counts = t.Counts.Add(r.Counts)
	t.ClientFaults = t.ClientFaults.Add(r.ClientFaults)
	t.ManagerFaults = t.ManagerFaults.Add(r.ManagerFaults)
	t.ManagerStarts += r.ManagerStarts
	t.ManagerKills += r.ManagerKills
	for k, v := range r.Actions {
		t.Actions[k] += v
	}
	for k, v := range r.Restores {
		t.Restores[k] += v
	}
	t.Elapsed += r.Elapsed
}

func (t *Totals) String() string {
	c := t.Counts
	var b strings.Builder
	fmt.Fprintf(&b, "%d scenarios (%d failed), %d violations, %s\n", t.Scenarios, t.Failed, t.Violations, t.Elapsed.Round(time.Second))
	fmt.Fprintf(&b, "  Lock calls %d: grants %d, re-locks %d, refused %d, errors %d (paused %d, not a lock %d), acquired by a machine being deleted %d\n",
		c.LockCalls, c.Grants, c.ReLocks, c.Refused, c.LockErrors+c.Paused+c.NotALock, c.Paused, c.NotALock, c.AcquiredDeleted)
	fmt.Fprintf(&b, "  inits %d, failed inits unlocked %d (Unlock errors %d)\n", c.Inits, c.UnlockCalls, c.UnlockErrors)
	fmt.Fprintf(&b, "  lock deletions: by the manager %d, by Unlock %d, by others (garbage collector, operator, disaster) %d\n",
		c.DeletesByManager, c.DeletesByUnlock, c.DeletesExternal)
	fmt.Fprintf(&b, "  faults injected: bootstrap clients %d of %d requests, managers %d of %d\n",
		t.ClientFaults.Injected(), t.ClientFaults.Requests, t.ManagerFaults.Injected(), t.ManagerFaults.Requests)
	fmt.Fprintf(&b, "  manager processes started %d, SIGKILLed %d\n", t.ManagerStarts, t.ManagerKills)
	keys := make([]string, 0, len(t.Actions))
	for k := range t.Actions {
		keys = append(keys, string(k))
	}
	sort.Strings(keys)
	b.WriteString("  actions:")
	for _, k := range keys {
		fmt.Fprintf(&b, " %s=%d", k, t.Actions[ActionKind(k)])
	}
	keys = keys[:0]
	for k := range t.Restores {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	b.WriteString("\n  restores:")
	for _, k := range keys {
		fmt.Fprintf(&b, " %q=%d", k, t.Restores[k])
	}
	return b.String()
}
