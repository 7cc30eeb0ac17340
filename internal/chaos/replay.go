package chaos

import (
	"github.com/initlock/initlock/internal/kubeenv/wire"

	"strings"
	"time"

	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
)

// Kinds the Watcher watches.
const (
	KindConfigMap = iota
	KindMachine
	KindCluster
	numKinds
)

var kindNames = [numKinds]string{"ConfigMap", "Machine", "Cluster"}

// Observed is one watch event, reduced to what the invariants need.
type Observed struct {
	Kind int
	Type watch.EventType
	Name string
	UID  types.UID
	// RV is the etcd revision of the change: for a deletion, the revision
	// at which the object was deleted.
	RV int64
	// Seen is when the Watcher received it.
	Seen time.Duration

	// LockOf is the cluster whose valid lock the ConfigMap is; "" for a
	// ConfigMap that is not a lock.
	LockOf string
	// Holder is the Machine the lock names.
	Holder string
	// Owners are the Cluster ownerReferences of the lock, as name/uid.
	Owners []string
	// Marked: the lock carries a release mark for its own UID.
	Marked bool

	// AddOnOf is the cluster whose add-on ConfigMap this is; OwnerUIDs
	// are its Cluster ownerReferences' UIDs.
	AddOnOf   string
	OwnerUIDs []types.UID

	// Grant is the Cluster's grant register, "" when it is empty.
	Grant string

	// Initialized, Paused and Deleting describe a Cluster.
	Initialized, Paused, Deleting bool
}

// replayState is the state of the objects as of the last watch event
// processed in revision order, across the three watches.
type replayState struct {
	queues [numKinds][]Observed
	// last is the highest revision each watch has delivered (or its
	// starting revision): every event of that kind up to it is queued.
	last     [numKinds]int64
	clusters map[string]*clusterSeen
	// machines maps the Machines that exist to their UIDs.
	machines map[string]types.UID
	// born is the revision at which each Machine that exists was created,
	// bornSeen when the watcher saw it created.
	born     map[string]int64
	bornSeen map[string]time.Duration
	// marked is, for each lock marked for release, the revision of the
	// write that put the mark on it.
	marked map[string]int64
}

type clusterSeen struct {
	exists, deleting bool
	// initialised is sticky: a restored Cluster, whose status the restore
	// dropped, is still a cluster whose control plane was initialised.
	initialised bool
	// grantee is the Machine its grant register names, "" for none.
	grantee string
	// uid is the Cluster's UID.
	uid types.UID
}

func newReplayState() replayState {
	return replayState{clusters: map[string]*clusterSeen{}, machines: map[string]types.UID{}, born: map[string]int64{}, bornSeen: map[string]time.Duration{}, marked: map[string]int64{}}
}

// lockDeletion is a lock deletion the watcher saw, with the state of the
// world at its revision.
type lockDeletion struct {
	uid                  types.UID
	name, cluster        string
	holder               string
	rv                   int64
	clusterLive          bool
	clusterInitialized   bool
	holderExists, judged bool
	// granted: the Cluster's grant register named the holder.
	granted bool
	// backAfterMark: the holder Machine that exists was created after the
	// release mark the deleted lock carries was written; holderBornSeen is
	// when the watcher saw it created.
	backAfterMark  bool
	holderBornSeen time.Duration
}

// StartRevision sets the revision each watch starts from.
func (c *Checker) StartRevision(kind int, rv int64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.replay.last[kind] = rv
}

// Observe takes a watch event. Events of one kind arrive in revision order.
// Invariant 3 is checked at once; invariant 4 once every watch has gone
// past the event's revision, so that the state of the other kinds at that
// revision is known.
func (c *Checker) Observe(o Observed) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if o.Kind == KindConfigMap {
		if f, ok := c.foreign[o.Name]; ok && (o.Type != watch.Added || string(o.UID) != f.UID) {
			c.violate(InvForeignUntouched, "configmap %s, which is not a lock, was %s (rv %d)", o.Name, strings.ToLower(string(o.Type)), o.RV)
		}
		if o.AddOnOf != "" {
			c.observeAddOn(o)
		}
	}
	c.latest[o.Kind][o.Name] = max(c.latest[o.Kind][o.Name], o.RV)
	r := &c.replay
	r.queues[o.Kind] = append(r.queues[o.Kind], o)
	if o.RV > r.last[o.Kind] {
		r.last[o.Kind] = o.RV
	}
	c.advance(false)
}

// Drain processes every queued event, whatever the watches' progress, and
// ends the judgement of lock deletions: those no actor reported are
// external (the garbage collector, an operator, a disaster).
func (c *Checker) Drain() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.advance(true)
	for _, ld := range c.deletions {
		if !ld.judged {
			ld.judged = true
			c.counts.DeletesExternal++
		}
	}
}

// advance processes queued events in revision order up to the lowest
// revision every watch has reached (all of them when all is set).
func (c *Checker) advance(all bool) {
	r := &c.replay
	horizon := r.last[0]
	for _, l := range r.last[1:] {
		horizon = min(horizon, l)
	}
	for {
		k := -1
		for i := range r.queues {
			if len(r.queues[i]) > 0 && (k < 0 || r.queues[i][0].RV < r.queues[k][0].RV) {
				k = i
			}
		}
		if k < 0 || (!all && r.queues[k][0].RV > horizon) {
			return
		}
		o := r.queues[k][0]
		r.queues[k] = r.queues[k][1:]
		c.process(o)
	}
}

func (c *Checker) process(o Observed) {
	r := &c.replay
	switch o.Kind {
	case KindCluster:
		cs := r.clusters[o.Name]
		if cs == nil {
			cs = &clusterSeen{}
			r.clusters[o.Name] = cs
		}
		cs.exists = o.Type != watch.Deleted
		cs.deleting = cs.exists && o.Deleting
		cs.initialised = cs.initialised || o.Initialized
		cs.uid = o.UID
		cs.grantee = ""
		if g := wire.GrantFrom(map[string]string{wire.GrantAnnotation: o.Grant}); o.Grant != "" && g.Held() {
			cs.grantee = g.MachineName
		}
	case KindMachine:
		switch {
		case o.Type == watch.Deleted:
			delete(r.machines, o.Name)
			delete(r.born, o.Name)
			delete(r.bornSeen, o.Name)
		case r.machines[o.Name] != o.UID:
			r.machines[o.Name] = o.UID
			if o.Type == watch.Added {
				r.born[o.Name], r.bornSeen[o.Name] = o.RV, o.Seen
			} else {
				delete(r.born, o.Name)
				delete(r.bornSeen, o.Name)
			}
		}
	case KindConfigMap:
		if o.LockOf == "" {
			return
		}
		if _, ok := r.marked[o.Name]; !o.Marked {
			delete(r.marked, o.Name)
		} else if !ok {
			r.marked[o.Name] = o.RV
		}
		if o.Type != watch.Deleted {
			return
		}
		cs := r.clusters[o.LockOf]
		ld := &lockDeletion{uid: o.UID, name: o.Name, cluster: o.LockOf, holder: o.Holder, rv: o.RV}
		// The holder exists as initlock keeps its place: a Machine of its
		// name, whatever its UID (a holder restored alone under a new UID
		// is the holder still; engine.Ref.Claims).
		_, ld.holderExists = r.machines[o.Holder]
		markRV, marked := r.marked[o.Name]
		ld.backAfterMark = marked && ld.holderExists && r.born[o.Holder] > markRV
		ld.holderBornSeen = r.bornSeen[o.Holder]
		delete(r.marked, o.Name)
		if cs != nil {
			ld.clusterLive = cs.exists && !cs.deleting
			ld.clusterInitialized = cs.initialised
			ld.granted = cs.exists && cs.grantee == o.Holder
		}
		c.deletions = append(c.deletions, ld)
		if _, ok := c.deleters[o.UID]; ok {
			c.judge(ld)
		}
	}
}

// judge checks invariant 4 for a lock deletion whose deleter is known.
func (c *Checker) judge(ld *lockDeletion) {
	d := c.deleters[ld.uid]
	ld.judged = true
	unsafe := ld.clusterLive && !ld.clusterInitialized && ld.holderExists
	switch {
	case strings.HasPrefix(d.Actor, "mgr-") && unsafe && ld.backAfterMark && ld.holderBornSeen > d.lastRead(ld.holder):
		// The window docs/design.md states ("A holder restored between the
		// manager's last live read and its delete"): the holder came back
		// after the release mark, and the watcher saw it created after the
		// replica deleting the lock last sent a read of it. A mark older than
		// the release that reuses it does not widen this: the replica's own
		// reads bound it. The explorer holds the release to its reading
		// exactly.
		c.counts.DeletesByManager++
		c.counts.DeletesInWindow++
		c.h.Add(d.Actor, "deleted lock", ld.name, itoa64(ld.rv), "held by "+ld.holder+", back after the release mark: the stated window")
	case strings.HasPrefix(d.Actor, "mgr-"):
		c.counts.DeletesByManager++
		c.h.Add(d.Actor, "deleted lock", ld.name, itoa64(ld.rv), "held by "+ld.holder)
		if unsafe {
			c.violate(InvNoUnsafeDelete, "manager replica %s deleted lock %s (uid %s, rv %d) held by %s while that machine existed and cluster %s existed, uninitialised",
				d.Actor, ld.name, ld.uid, ld.rv, ld.holder, ld.cluster)
		}
	case d.Op == opUnlock:
		c.counts.DeletesByUnlock++
	case d.Op == opLock && d.Caller == ld.holder && !ld.granted:
		// A Lock call that wrote a lock for its own Machine and was then
		// refused (the Cluster was paused, or another Machine won the
		// register) deletes that lock: no grant named it.
		c.counts.DeletesWithdrawn++
		c.h.Add(d.Actor, "withdrew lock", ld.name, itoa64(ld.rv), "its own, ungranted, written for "+ld.holder)
	default:
		c.violate(InvNoUnsafeDelete, "%s deleted lock %s (uid %s, rv %d) held by %s outside Unlock (during %q)",
			d.Actor, ld.name, ld.uid, ld.rv, ld.holder, d.Op)
	}
}
