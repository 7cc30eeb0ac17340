package explore

import (
	"slices"

	"github.com/initlock/initlock/internal/kubeenv/apimodel"
)

// footprint is what a step reads and writes, as sets of resources: the
// objects of the store, the budgets, the checker's grants, and each
// actor's own state (what it was told, its caches' floors, its calls in
// flight). Two steps whose footprints do not conflict (neither writes what
// the other reads or writes) commute: taken in either order from one state
// they lead to one state, and neither enables or disables the other.
type footprint struct{ read, write uint64 }

// The resources, one bit each. Machines beyond the 16th and actors beyond
// the 32nd share the last bit of their kind, which only adds conflicts.
const (
	resLock          = iota // the lock ConfigMap
	resCluster              // the Cluster's metadata and spec
	resClusterStatus        // its status and identity (UID): only events change them
	resFaults               // the fault budgets (faults and late)
	resLate                 // the writes held back
	resEvents               // the event budgets
	resRunning              // which actors still run (events happen only then)
	resStale                // the stale-read budget
	resGrants               // the checker's grants
	resMachine0      = 16   // 16 Machines
	resActor0        = 32   // 32 actors
)

// everything conflicts with every step.
var everything = footprint{read: ^uint64(0), write: ^uint64(0)}

func (f footprint) conflicts(g footprint) bool {
	return f.write&(g.read|g.write) != 0 || g.write&(f.read|f.write) != 0
}

func (f footprint) union(g footprint) footprint {
	return footprint{read: f.read | g.read, write: f.write | g.write}
}

func (f *footprint) reads(res ...int) {
	for _, r := range res {
		f.read |= 1 << r
	}
}

func (f *footprint) writes(res ...int) {
	for _, r := range res {
		f.write |= 1 << r
	}
}

func bit(r int) uint64 { return 1 << r }

// machineBits and allActorBits are the resources of every Machine and
// every actor.
const (
	machineBits  = uint64(0xffff) << resMachine0
	allActorBits = uint64(0xffffffff) << resActor0
)

// keyBits are the resources of a store object; a read of the Cluster reads
// its status too.
func (s *System) keyBits(k apimodel.Key) uint64 {
	switch k.Kind {
	case "ConfigMap":
		return bit(resLock)
	case "Cluster":
		return bit(resCluster) | bit(resClusterStatus)
	case "Machine":
		i := slices.Index(s.machineNames, k.Name)
		if i < 0 {
			return machineBits
		}
		return bit(resMachine0 + min(i, 15))
	}
	return ^uint64(0)
}

// actorBit is the resource of an actor's own state.
func (s *System) actorBit(actor string) uint64 {
	i := slices.Index(s.actorNames, actor)
	if i < 0 {
		return allActorBits
	}
	return bit(resActor0 + min(i, 31))
}

// everyKey reads every object of the store.
func everyKey() uint64 {
	return bit(resLock) | bit(resCluster) | bit(resClusterStatus) | machineBits
}

// footprintOf is what choice c reads and writes by itself, before the
// actor it releases runs on: that part (checker hooks, the end of the
// actor) is noted while it runs (touch) and added to it.
func (s *System) footprintOf(c choice) footprint {
	var f footprint
	switch {
	case c.event != nil:
		return s.eventFootprint(c.event)
	case c.lateI > 0:
		r := s.late[c.lateI-1]
		f.writes(resLate)
		f.reads(resLate)
		f = f.union(s.applyFootprint(r))
	case c.p.branch != nil:
		f.write |= s.actorBit(c.p.branch.actor)
		if c.p.branch.wait {
			// After a wait the actor reads its cache, which shows what
			// every write so far made.
			f.read |= everyKey()
		}
	case c.p.view != nil:
		f.write |= s.actorBit(c.p.view.actor)
		f.read |= s.keyBits(c.p.view.key)
		f.reads(resStale)
		f.writes(resStale)
	default:
		r := c.p.req
		f.write |= s.actorBit(r.Actor)
		switch c.out {
		case served, lost:
			if r.Write() {
				f = f.union(s.applyFootprint(r))
			} else {
				f.read |= s.keyBits(r.Key)
			}
		case late:
			f.writes(resLate)
		}
		if c.out != served {
			f.reads(resFaults)
			f.writes(resFaults)
		}
	}
	return f
}

// applyFootprint is what applying write r reads and writes, with the
// checker's judgement of it.
func (s *System) applyFootprint(r *apimodel.Request) footprint {
	b := s.keyBits(r.Key)
	f := footprint{read: b, write: b}
	if r.Key.Kind == "Cluster" && (r.Verb == "patch" || r.Verb == "update") {
		// The status subresource and the UID are kept.
		f.write &^= bit(resClusterStatus)
	}
	if r.Key.Kind == "ConfigMap" {
		// The checker judges the manager's writes of the lock against
		// the grants, and a delete against the Cluster, the Machines and
		// the releases under way; it ends upstream grants.
		f.reads(resGrants)
		if r.Verb == "delete" {
			f.read |= everyKey()
			f.writes(resGrants)
		}
	}
	return f
}

// eventFootprints declares what each kind of adversary event reads and
// writes, with the checker's reaction (losses end or weaken the grants and
// mark the calls in flight). A kind missing here touches everything: a new
// kind of event is dependent with every step until it declares less.
var eventFootprints = map[EventKind]func(s *System) footprint{
	DeleteLock: func(*System) footprint {
		// With the lock guard the checker judges the delete against the
		// Cluster, the Machines and the releases under way.
		return footprint{read: everyKey() | bit(resGrants), write: bit(resLock) | bit(resGrants) | allActorBits}
	},
	HoldDeletion: func(*System) footprint { return footprint{read: bit(resLock), write: bit(resLock)} },
	FinalizerGone: func(*System) footprint {
		return footprint{read: everyKey() | bit(resGrants), write: bit(resLock) | bit(resGrants) | allActorBits}
	},
	RemoveRegister: func(*System) footprint {
		return footprint{read: bit(resCluster), write: bit(resCluster) | bit(resGrants) | allActorBits}
	},
	RevertRegister: func(*System) footprint {
		return footprint{read: bit(resCluster), write: bit(resCluster) | bit(resGrants) | allActorBits}
	},
	RecreateMachine: func(*System) footprint {
		return footprint{read: machineBits, write: machineBits | bit(resGrants) | allActorBits}
	},
	Pause:   func(*System) footprint { return footprint{read: bit(resCluster), write: bit(resCluster)} },
	Unpause: func(*System) footprint { return footprint{read: bit(resCluster), write: bit(resCluster)} },
}

// eventFootprint is an event's footprint, with the budgets it spends and
// its condition (some actor still runs).
func (s *System) eventFootprint(e *event) footprint {
	decl, ok := eventFootprints[e.kind]
	if !ok {
		return everything
	}
	f := decl(s)
	f.reads(resEvents, resRunning)
	f.writes(resEvents)
	return f
}

// touch adds f to the footprint of the step under way: the checker's
// hooks and the end of an actor call it as the actor runs on.
func (s *System) touch(f footprint) {
	s.mu.Lock()
	s.stepFP = s.stepFP.union(f)
	s.mu.Unlock()
}

// hook footprints of the checker's hooks the actors call.
var (
	// callStarted notes the live Machines and the lock the call begins
	// with.
	hookCallStarted = footprint{read: machineBits | bit(resLock)}
	// lockReturned, for a caller refused as stale, looks for what the call
	// left in the register and the lock.
	hookStale = footprint{read: bit(resLock) | bit(resCluster)}
	// lockReturned, for a grant, judges it against the grants, the
	// Machine and the Cluster's status, and adds it.
	hookGranted = footprint{read: everyKey() | bit(resGrants), write: bit(resGrants)}
	// unlocking ends a grant.
	hookUnlocking = footprint{read: bit(resGrants), write: bit(resGrants)}
	// reconcileStarted notes the live Cluster's UID.
	hookReconcile = footprint{read: bit(resCluster) | bit(resClusterStatus)}
	// actorDone may end the adversary's turn.
	hookDone = footprint{write: bit(resRunning)}
)
