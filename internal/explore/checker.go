package explore

import (
	"errors"
	"fmt"
	"strings"

	"k8s.io/apimachinery/pkg/types"

	"github.com/initlock/initlock/internal/kubeenv/apimodel"
	"github.com/initlock/initlock/internal/kubeenv/wire"
	"github.com/initlock/initlock/pkg/initlock"
)

// Invariants the checker holds every state to.
const (
	// InvOneHolder: at most one Machine is granted the lock while it exists,
	// the control plane is not initialised and it has not called Unlock
	// since its grant.
	InvOneHolder = "one-holder"
	// InvNoUnsafeDelete: the manager never deletes the lock while a Machine
	// holds a grant.
	InvNoUnsafeDelete = "no-unsafe-delete"
	// InvLiveOwner: the manager points the lock only at a Cluster UID that
	// was live while it reconciled.
	InvLiveOwner = "live-owner"
	// InvDefence: while a Machine holds a grant, both the grant register
	// and the lock name it, but for what the adversary's losses removed:
	// nothing else (a write applied late, twice, or by another actor) takes
	// a protection away.
	InvDefence = "defence-in-depth"
	// InvLiveCaller: the lock is granted only to a Machine that was live
	// during the Lock call, never to a deleted one's stale object.
	InvLiveCaller = "live-caller"
	// InvNotPaused: nothing is written to a paused Cluster, and the
	// manager writes no lock of a Cluster it read paused.
	InvNotPaused = "not-paused"
	// InvOnlyLocks: nothing that is not a lock is changed: no Machine, and
	// of a Cluster nothing but its grant register.
	InvOnlyLocks = "only-locks"
	// InvPauseTest: no write races the pause test: a write of the lock is
	// never in flight together with a write of the grant register (which
	// tests that the Cluster is not paused) of the same actor.
	InvPauseTest = "pause-test"
	// InvKeepHeld: a Lock call never deletes a lock that existed before it
	// began, even with a write applied after the call gave up.
	InvKeepHeld = "keep-held"
	// InvStaleLeftover: a Lock call refused because its Machine object is
	// stale leaves no grant and no lock naming that object's UID.
	InvStaleLeftover = "stale-leftover"
	// InvStaleRelease: an Unlock never writes once its Machine object is
	// stale (the Machine was restored, or created again, since): the
	// restored Machine's protections stay.
	InvStaleRelease = "stale-release"
	// InvLiveness: once the actors are done, with no holder and the control
	// plane not initialised, some Machine asking again is granted the lock,
	// or the state is one only an operator can resolve (a corrupt lock or
	// register, a ConfigMap in the lock's way).
	InvLiveness = "liveness"
	// InvHeldLock: with the lock guard installed (Scenario.Guard), nothing
	// removes the lock, from the instant it exists, while the Machine it
	// names exists, the Cluster exists and is not initialised, and that
	// Machine has not released it; but in the window docs/design.md
	// accepts (checker.inWindow).
	InvHeldLock = "held-lock"
)

// Violation is a broken invariant.
type Violation struct {
	Invariant string
	Detail    string
}

func (v Violation) String() string { return v.Invariant + ": " + v.Detail }

// grant is a Lock call that returned Acquired, for as long as it counts.
type grant struct {
	machine string
	uid     types.UID
	// upstream: the grant of a lock an upstream provider wrote, which
	// nothing but that ConfigMap protects.
	upstream bool
	// register and lock tell which protections are expected to name the
	// Machine: both, but for what an adversary's loss removed since.
	register, lock bool
}

type checker struct {
	grants    []grant
	violation *Violation
	// reconciling and liveUIDs: whether the manager is in a reconcile,
	// and the Cluster UIDs live at some moment of it.
	reconciling bool
	liveUIDs    map[types.UID]bool
	// calls are the Lock calls in flight, with the Machine UIDs live at
	// some moment of each, and the protections the adversary took while
	// they ran.
	calls map[string]*call
	// origin is, for each delete of the lock a Lock call issued, the UID
	// of the lock when that call began.
	origin map[*apimodel.Request]types.UID
	// prev maps the UID of a Machine a restore created to the UID of the
	// Machine it restored: the same Machine.
	prev map[types.UID]types.UID
	// operatorNeeded tells that the execution ended in a state only an
	// operator can resolve (the liveness probe's documented exception).
	operatorNeeded bool
	// releasing maps the Machines whose provider releases the lock to the
	// UID of the object it releases with.
	releasing map[string]types.UID
	// pausedSeen tells that the newest Cluster the manager read in its
	// reconcile (from its cache or live) was paused.
	pausedSeen bool
	// backUnseen are the actors that have not seen the upstream holder's
	// Machine since it came back (MachineBack).
	backUnseen map[string]bool
	// marker is the actor whose release mark is on the lock while its call
	// (a Lock or Unlock, a release, a reconcile) runs; markerBack tells
	// that the Machine the lock names came back after that actor last saw
	// it, before its mark or since.
	marker     string
	markerBack bool
	// retired are the actors whose release retired a grant and has not
	// read a Machine since: its withdraw of that grant decides on Machines
	// read before the retire.
	retired map[string]bool
	// forced is the UID of the lock the operator's forced release
	// inspected: it releases that lock whoever holds it.
	forced types.UID
	// relinkReads are the relinker's last reads of the owners, and
	// relinkPatches its patches in flight with the reads as they stood
	// when each was sent.
	relinkReads   map[string]relinkRead
	relinkPatches map[*apimodel.Request]map[string]relinkRead
}

type call struct {
	live                   map[types.UID]bool
	lostRegister, lostLock bool
	// lock is the UID of the lock when the call began, "" when none.
	lock types.UID
	// tokens is how many tokens the actor had drawn when the call began.
	tokens int
	// upstream tells a call of CABPK's own mutex, not initlock's Lock.
	upstream bool
}

func (c *checker) violate(inv, format string, args ...any) {
	if c.violation == nil {
		c.violation = &Violation{Invariant: inv, Detail: fmt.Sprintf(format, args...)}
	}
}

// stateParts is what of the checker the future depends on: sets of lines,
// each line one fact, so that renaming Machines and sorting the lines
// again gives the state of the renamed execution.
func (c *checker) stateParts() [][]string {
	var gs []string
	for _, g := range c.grants {
		gs = append(gs, fmt.Sprintf("grant %s/%s/%v/%v/%v", g.machine, g.uid, g.upstream, g.register, g.lock))
	}
	var calls []string
	for a, cl := range c.calls {
		calls = append(calls, fmt.Sprintf("call %s %v %v %s", a, cl.lostRegister, cl.lostLock, cl.lock))
		for u := range cl.live {
			calls = append(calls, fmt.Sprintf("call %s live %s", a, u))
		}
	}
	live := []string{fmt.Sprint("reconciling ", c.reconciling, " paused seen ", c.pausedSeen)}
	if c.marker != "" {
		live = append(live, fmt.Sprint("marker ", c.marker, " ", c.markerBack))
	}
	for a := range c.backUnseen {
		live = append(live, "back unseen by "+a)
	}
	if c.forced != "" {
		live = append(live, "forced "+string(c.forced))
	}
	for a := range c.retired {
		live = append(live, "retired, unread by "+a)
	}
	for m, uid := range c.releasing {
		live = append(live, "releasing "+m+" "+string(uid))
	}
	for u := range c.liveUIDs {
		live = append(live, "live "+string(u))
	}
	live = append(live, c.relinkState()...)
	var lineage []string
	for n, o := range c.prev {
		lineage = append(lineage, "restored "+string(n)+" from "+string(o))
	}
	return [][]string{gs, calls, live, lineage}
}

func (c *checker) anyGrant() bool { return len(c.grants) > 0 }

// upstream records the grant of a lock an upstream provider wrote.
func (c *checker) upstream(s *System, machine string) {
	sn := s.snapshot()
	c.grants = append(c.grants, grant{machine: machine, uid: sn.machines[machine].UID, upstream: true, lock: true})
}

// callStarted notes a Lock call of actor.
func (c *checker) callStarted(s *System, actor string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if c.calls == nil {
		c.calls = map[string]*call{}
	}
	delete(c.releasing, strings.TrimPrefix(actor, "provider/"))
	cl := &call{live: map[types.UID]bool{}, tokens: s.tokens[actor]}
	if lk := s.snapshot().lock; lk != nil {
		cl.lock = lk.UID
	}
	c.calls[actor] = cl
	c.observeMachines(s, cl.live)
}

func (c *checker) observeMachines(s *System, into map[types.UID]bool) {
	for _, m := range s.snapshot().machines {
		into[m.UID] = true
	}
}

// lockReturned judges a Lock result. A restored Machine is the Machine it
// restores: a grant to an object of an earlier incarnation of it is a grant
// to it.
func (c *checker) lockReturned(s *System, actor, machine string, uid types.UID, res initlock.Result, err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	cl := c.calls[actor]
	delete(c.calls, actor)
	if errors.Is(err, initlock.ErrStaleMachine) {
		c.staleLeftover(s, actor, machine, uid, cl)
	}
	if err != nil || !res.Acquired {
		return
	}
	if !cl.live[uid] {
		c.violate(InvLiveCaller, "%s was granted the lock for machine %s of uid %s, which was not live during the call", actor, machine, uid)
	}
	// A grant counts while its Machine (that incarnation, or what a restore
	// made of it) exists: one to an incarnation deleted during the call,
	// even if a Machine of its name was created again since, protects
	// nothing and names nothing that may run init (pkg/initlock documents
	// it).
	live := c.liveIncarnation(s, machine, uid)
	if live == "" {
		return
	}
	if c.granted(machine, uid, "") {
		return
	}
	// A grant counts while its Machine exists and the control plane is not
	// initialised: one to a Machine deleted during the call, or in an
	// initialised cluster, protects nothing. A protection the adversary
	// took during the call is expected only if the call wrote it again.
	if s.initialisedLocked() {
		return
	}
	sn := s.snapshot()
	g := grant{machine: machine, uid: live, register: !cl.lostRegister || c.registerNames(sn, machine, live), lock: !cl.lostLock || c.lockNames(sn, machine, live)}
	if g.register || g.lock {
		c.grants = append(c.grants, g)
		c.defended(s)
	}
}

// granted judges a grant to machine (an incarnation of uid) against the
// grants that count: any other holder violates one-holder. It tells
// whether machine already holds the lock. by says who granted it.
func (c *checker) granted(machine string, uid types.UID, by string) bool {
	holds := false
	for _, g := range c.grants {
		if g.machine == machine && c.sameMachine(g.uid, uid) {
			holds = true
			continue
		}
		c.violate(InvOneHolder, "machine %s (uid %s) was granted the lock%s while machine %s (uid %s) holds it", machine, uid, by, g.machine, g.uid)
	}
	return holds
}

// staleLeftover checks that a call refused as stale left no grant and no
// lock of its own (carrying a token it drew) naming the stale object's UID;
// not a protection the adversary changed during the call (a revert may
// bring back what the call withdrew).
func (c *checker) staleLeftover(s *System, actor, machine string, uid types.UID, cl *call) {
	sn, from := s.snapshot(), cl.tokens
	mine := func(token string) bool {
		var n int
		_, err := fmt.Sscanf(strings.TrimPrefix(token, actor+"-t"), "%d", &n)
		return strings.HasPrefix(token, actor+"-t") && err == nil && n > from
	}
	if g := sn.cluster; !cl.lostRegister && g != nil && g.Grant.Held() && g.Grant.MachineUID == uid && mine(g.Grant.Token) {
		c.violate(InvStaleLeftover, "%s was refused as stale, but left its grant for machine %s of uid %s", actor, machine, uid)
	}
	if lk := sn.lock; !cl.lostLock && lk != nil && lk.Err == nil && lk.Record.MachineUID == uid && mine(lk.Record.Token) {
		c.violate(InvStaleLeftover, "%s was refused as stale, but left its lock for machine %s of uid %s", actor, machine, uid)
	}
}

func (s *System) initialisedLocked() bool {
	cl := s.snapshot().cluster
	return cl != nil && cl.Initialized
}

// unlocking ends a grant: the Machine no longer runs init.
func (c *checker) unlocking(machine string, uid types.UID) {
	c.drop(func(g grant) bool { return g.machine == machine && g.uid == uid })
	if c.releasing == nil {
		c.releasing = map[string]types.UID{}
	}
	c.releasing[machine] = uid
}

// machineBack: the upstream holder's Machine came back; no actor has seen
// it since.
func (c *checker) machineBack(s *System) {
	c.backUnseen = map[string]bool{}
	for _, a := range s.actorNames {
		if s.running[a] {
			c.backUnseen[a] = true
		}
	}
	if c.marker != "" {
		c.markerBack = true
	}
}

// callEnded: actor's call is over; a release mark of its left on the lock
// is no longer one of a release under way.
func (c *checker) callEnded(actor string) {
	if c.marker == actor {
		c.marker, c.markerBack = "", false
	}
}

func (c *checker) machineGone(machine string) {
	c.drop(func(g grant) bool { return g.machine == machine })
}

func (c *checker) clusterReplaced() { c.grants = nil }
func (c *checker) initialised()     { c.grants = nil }

// lockDeleted ends the grant of an upstream holder: nothing else protects
// it, a limit of upstream locks that pkg/initlock documents. Other grants
// lose the lock's protection.
func (c *checker) lockDeleted() {
	c.marker, c.markerBack = "", false
	c.drop(func(g grant) bool { return g.upstream })
	for i := range c.grants {
		c.grants[i].lock = false
	}
	for _, cl := range c.calls {
		cl.lostLock = true
	}
}

// registerLost: the adversary changed the register.
func (c *checker) registerLost() {
	for i := range c.grants {
		c.grants[i].register = false
	}
	for _, cl := range c.calls {
		cl.lostRegister = true
	}
}

// defended checks that every grant's expected protections name its
// Machine.
func (c *checker) defended(s *System) {
	if len(c.grants) == 0 {
		return
	}
	sn := s.snapshot()
	for _, g := range c.grants {
		if g.register && !c.registerNames(sn, g.machine, g.uid) {
			raw := ""
			if sn.cluster != nil {
				raw = sn.cluster.Grant.Raw()
			}
			c.violate(InvDefence, "machine %s (uid %s) holds a grant, but the grant register no longer names it: %s", g.machine, g.uid, raw)
		}
		if g.lock && !c.lockNames(sn, g.machine, g.uid) {
			c.violate(InvDefence, "machine %s (uid %s) holds a grant, but the lock no longer names it", g.machine, g.uid)
		}
	}
}

// registerNames tells whether the grant register names the Machine called
// machine of UID uid.
func (c *checker) registerNames(sn snapshot, machine string, uid types.UID) bool {
	return sn.cluster != nil && sn.cluster.Grant.Held() && c.names(sn.cluster.Grant.Ref, sn.cluster.UID, machine, uid)
}

// lockNames tells whether the lock names the Machine called machine of
// UID uid.
func (c *checker) lockNames(sn snapshot, machine string, uid types.UID) bool {
	return sn.lock != nil && sn.lock.Err == nil && c.names(sn.lock.Record.Ref, sn.clusterUID(), machine, uid)
}

// names tells whether ref names the Machine called machine of UID uid in a
// Cluster of UID clusterUID: as the records' own rule reads it
// (wire.Ref.Names), or because uid is what a restore made of the Machine
// ref was written for. A holder restored alone, while its Cluster keeps
// its UID, is the holder still: it comes back with its bootstrap data.
func (c *checker) names(ref wire.Ref, clusterUID types.UID, machine string, uid types.UID) bool {
	if ref.Names(clusterUID, machine, uid) {
		return true
	}
	return ref.MachineName == machine && ref.MachineUID != "" && c.sameMachine(uid, ref.MachineUID)
}

// clusterUID is the Cluster's UID; empty when it does not exist.
func (sn snapshot) clusterUID() types.UID {
	if sn.cluster == nil {
		return ""
	}
	return sn.cluster.UID
}

func (c *checker) drop(match func(grant) bool) {
	kept := c.grants[:0]
	for _, g := range c.grants {
		if !match(g) {
			kept = append(kept, g)
		}
	}
	c.grants = kept
}
