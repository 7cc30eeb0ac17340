package chaos

import (
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/types"

	"github.com/initlock/initlock/pkg/initlock"
)

// Checker checks the invariants of one scenario, as the actors report what
// they do and the Watcher reports what the API server stored. It is safe
// for concurrent use.
type Checker struct {
	h *History

	mu         sync.Mutex
	violations []Violation

	// Invariant 1: the open hold of each cluster, by cluster name.
	holds map[string]*hold
	// epochs counts the deletions of each Machine, by name, so that a Lock
	// that returns after its Machine was deleted opens no hold.
	epochs      map[string]int
	deleting    map[string]bool
	initialised map[string]bool
	counts      Counts

	// Invariant 3: the planted ConfigMaps that are not locks, by name.
	foreign map[string]ForeignConfigMap

	// Invariant 4: successful ConfigMap deletions by UID, as the injectors
	// saw them, and the lock deletions the watcher saw.
	deleters map[types.UID]Deletion
	// machineReads are, for each actor, when it last sent a read of each
	// Machine ("" for a list), on the history's clock.
	machineReads map[string]map[string]time.Duration
	deletions    []*lockDeletion
	replay       replayState

	// Identity: the UID of each Machine and Cluster the scenario created,
	// by name (goneUID once deleted), and the latest revision the watcher
	// saw of each object, by kind and name.
	machineUIDs, clusterUIDs map[string]types.UID
	latest                   [numKinds]map[string]int64

	// Invariant 5: restored add-ons and the references seen on them.
	relinks relinkState
}

type hold struct {
	machine string
	since   time.Duration
	// upstream: the hold is an upstream provider's lock, with no grant
	// record; only the ConfigMap protects it.
	upstream bool
}

// NewChecker returns a Checker that records into h.
func NewChecker(h *History) *Checker {
	return &Checker{
		h:            h,
		holds:        map[string]*hold{},
		epochs:       map[string]int{},
		deleting:     map[string]bool{},
		initialised:  map[string]bool{},
		foreign:      map[string]ForeignConfigMap{},
		deleters:     map[types.UID]Deletion{},
		machineReads: map[string]map[string]time.Duration{},
		replay:       newReplayState(),
		machineUIDs:  map[string]types.UID{},
		clusterUIDs:  map[string]types.UID{},
		latest:       [numKinds]map[string]int64{{}, {}, {}},
		relinks:      relinkState{clusterRestore: map[types.UID]string{}, addOns: map[types.UID]restoredAddOn{}},
	}
}

// violate records a violation; the caller holds c.mu.
func (c *Checker) violate(inv int, format string, args ...any) {
	msg := fmt.Sprintf(format, args...)
	for _, v := range c.violations {
		if v.Invariant == inv && v.Message == msg {
			return
		}
	}
	e := c.h.Add("check", fmt.Sprintf("VIOLATION %d", inv), "", "", msg)
	c.violations = append(c.violations, Violation{Invariant: inv, At: e.At, Message: msg})
}

// Violate records a violation found outside the Checker.
func (c *Checker) Violate(inv int, format string, args ...any) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.violate(inv, format, args...)
}

// Violations returns the violations found so far.
func (c *Checker) Violations() []Violation {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]Violation(nil), c.violations...)
}

// Counts returns what the scenario did so far.
func (c *Checker) Counts() Counts {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.counts
}

// Epoch returns the deletion count of a Machine; take it before calling
// Lock and pass it to Acquired.
func (c *Checker) Epoch(machine string) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.epochs[machine]
}

// Initialized tells whether a cluster's control plane has been
// initialised (for the cluster's whole life, whatever its object says).
func (c *Checker) Initialized(cluster string) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.initialised[cluster]
}

// Holder returns the machine holding a cluster's lock, or "".
func (c *Checker) Holder(cluster string) string {
	c.mu.Lock()
	defer c.mu.Unlock()
	if h := c.holds[cluster]; h != nil {
		return h.machine
	}
	return ""
}

// Granted returns the machine holding a cluster's lock by a grant of this
// package (not an upstream lock), or "".
func (c *Checker) Granted(cluster string) string {
	c.mu.Lock()
	defer c.mu.Unlock()
	if h := c.holds[cluster]; h != nil && !h.upstream {
		return h.machine
	}
	return ""
}

// LockCall records the start of a Lock call.
func (c *Checker) LockCall() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.counts.LockCalls++
}

// Acquired records that Lock returned Acquired for machine, whose deletion
// count was epoch when the call began, called with the objects of in, and
// checks invariant 1. It tells whether this opened a new hold (a grant).
func (c *Checker) Acquired(actor, cluster, machine string, epoch int, in Incarnation) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.epochs[machine] != epoch || c.deleting[machine] {
		c.counts.AcquiredDeleted++
		c.h.Add(actor, "acquired (deleted)", machine, "", "the machine was deleted while Lock ran; no hold")
		return false
	}
	if why := c.gone(cluster, machine, in); why != "" {
		c.counts.AcquiredGone++
		c.h.Add(actor, "acquired (gone)", machine, "", why+"; no hold")
		return false
	}
	if c.initialised[cluster] {
		c.h.Add(actor, "acquired (init done)", machine, "", "cluster "+cluster+" is initialised; no hold")
		return false
	}
	if h := c.holds[cluster]; h != nil {
		if h.machine == machine && h.upstream {
			// The Locker healed the upstream lock and recorded a grant.
			h.upstream = false
			c.counts.Grants++
			c.h.Add(actor, "acquired", machine, "", "grant for cluster "+cluster+" (upstream lock healed)")
			return true
		}
		if h.machine == machine {
			c.counts.ReLocks++
			c.h.Add(actor, "re-acquired", machine, "", "")
			return false
		}
		c.h.Add(actor, "acquired", machine, "", "")
		c.violate(InvNoOverlap, "cluster %s: machine %s acquired the lock while %s has held it since %.3fs",
			cluster, machine, h.machine, h.since.Seconds())
		return false
	}
	e := c.h.Add(actor, "acquired", machine, "", "grant for cluster "+cluster)
	c.holds[cluster] = &hold{machine: machine, since: e.At}
	c.counts.Grants++
	return true
}

// Refused records a Lock that did not acquire.
func (c *Checker) Refused(actor, machine, holder string, recreated bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.counts.Refused++
	d := "held by " + holder
	if recreated {
		d += " (recreated for it)"
	}
	c.h.Add(actor, "refused", machine, "", d)
}

// LockError records a Lock that failed.
func (c *Checker) LockError(actor, machine string, err error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	switch {
	case errors.Is(err, initlock.ErrClusterPaused):
		c.counts.Paused++
		c.h.Add(actor, "paused", machine, "", "")
	case errors.Is(err, initlock.ErrNotALock):
		c.counts.NotALock++
		c.h.Add(actor, "not a lock", machine, "", "")
	default:
		c.counts.LockErrors++
		c.h.Add(actor, "lock error", machine, "", oneLine(err))
	}
}

// Unlocking ends machine's hold: the machine gave up (its init failed) and
// is about to call Unlock. It tells whether the machine held the lock.
func (c *Checker) Unlocking(actor, cluster, machine string) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	h := c.holds[cluster]
	if h == nil || h.machine != machine {
		return false
	}
	delete(c.holds, cluster)
	c.counts.UnlockCalls++
	c.h.Add(actor, "init failed, unlock", machine, "", "")
	return true
}

// UnlockError records a failed Unlock.
func (c *Checker) UnlockError(actor, machine string, err error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.counts.UnlockErrors++
	c.h.Add(actor, "unlock error", machine, "", oneLine(err))
}

// FinishInit ends machine's hold because its init succeeded, and marks the
// cluster initialised. It tells whether machine still held the lock; if not,
// nothing changes.
func (c *Checker) FinishInit(actor, cluster, machine string) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	h := c.holds[cluster]
	if h == nil || h.machine != machine {
		return false
	}
	delete(c.holds, cluster)
	c.initialised[cluster] = true
	c.counts.Inits++
	c.h.Add(actor, "init done", machine, "", "cluster "+cluster+" initialised")
	return true
}

// UpstreamHold records that machine holds cluster's lock as an upstream
// provider wrote it: without a grant.
func (c *Checker) UpstreamHold(cluster, machine string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	e := c.h.Add("setup", "upstream lock", machine, "", "held without a grant")
	c.holds[cluster] = &hold{machine: machine, since: e.At, upstream: true}
}

// LockLost records that someone outside initlock is about to delete
// cluster's lock or make the garbage collector delete it. An upstream hold
// ends: without a grant nothing protects it (a documented limit of
// the grant protocol).
func (c *Checker) LockLost(actor, cluster string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if h := c.holds[cluster]; h != nil && h.upstream {
		delete(c.holds, cluster)
		c.h.Add(actor, "hold ends", h.machine, "", "its upstream lock is lost, and no grant protects it")
	}
}

// MarkInitialized marks a cluster initialised without a hold: it was
// created initialised.
func (c *Checker) MarkInitialized(cluster string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.initialised[cluster] = true
}

// MachineDeleting records that machine is about to be deleted: its hold
// ends, and no Lock call for it opens one until MachineGone.
func (c *Checker) MachineDeleting(actor, cluster, machine string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.epochs[machine]++
	c.deleting[machine] = true
	if _, ok := c.machineUIDs[machine]; ok {
		c.machineUIDs[machine] = goneUID
	}
	if h := c.holds[cluster]; h != nil && h.machine == machine {
		delete(c.holds, cluster)
		c.h.Add(actor, "hold ends", machine, "", "the machine is being deleted")
	}
}

// MachineGone records that machine's deletion is complete. A Lock call that
// began before cannot open a hold.
func (c *Checker) MachineGone(cluster, machine string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.epochs[machine]++
	c.deleting[machine] = false
	if h := c.holds[cluster]; h != nil && h.machine == machine {
		delete(c.holds, cluster)
	}
}

// ForeignConfigMap is a planted ConfigMap that is not a lock.
type ForeignConfigMap struct {
	Name, UID, ResourceVersion, Checksum string
}

// PlantForeign records a ConfigMap that must never change.
func (c *Checker) PlantForeign(f ForeignConfigMap) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.foreign[f.Name] = f
}

// Foreign returns the planted ConfigMaps.
func (c *Checker) Foreign() []ForeignConfigMap {
	c.mu.Lock()
	defer c.mu.Unlock()
	return slices.SortedFunc(maps.Values(c.foreign), func(a, b ForeignConfigMap) int { return strings.Compare(a.Name, b.Name) })
}

// MachineRead records that actor sent a read of Machine machine ("" for a
// list of Machines).
func (c *Checker) MachineRead(actor, machine string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.machineReads[actor] == nil {
		c.machineReads[actor] = map[string]time.Duration{}
	}
	c.machineReads[actor][machine] = c.h.Since()
}

// Deleted records a ConfigMap DELETE that reached the API server, with
// when its actor last read each Machine before it.
func (c *Checker) Deleted(d Deletion) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if d.Code >= 300 || d.UID == "" {
		return
	}
	d.reads = maps.Clone(c.machineReads[d.Actor])
	c.deleters[d.UID] = d
	for _, ld := range c.deletions {
		if ld.uid == d.UID && !ld.judged {
			c.judge(ld)
		}
	}
}

// oneLine shortens an error for the history.
func oneLine(err error) string {
	s := strings.ReplaceAll(err.Error(), "\n", " ")
	if len(s) > 300 {
		s = s[:300] + "..."
	}
	return s
}
