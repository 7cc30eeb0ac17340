package explore

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"sync"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"

	"github.com/initlock/initlock/internal/kubeenv"
	"github.com/initlock/initlock/internal/kubeenv/apimodel"
	"github.com/initlock/initlock/internal/kubeenv/wire"
	"github.com/initlock/initlock/pkg/initlock/keeper"
)

// The world every scenario starts from: one Cluster and its control-plane
// Machines, in one namespace.
const (
	namespace   = "ns"
	clusterName = "c1"
	lockName    = "c1-lock"
)

var (
	clusterKey = apimodel.Key{Kind: "Cluster", Namespace: namespace, Name: clusterName}
	lockKey    = apimodel.Key{Kind: "ConfigMap", Namespace: namespace, Name: lockName}
)

func machineKey(name string) apimodel.Key {
	return apimodel.Key{Kind: "Machine", Namespace: namespace, Name: name}
}

// budget is what is left of the scenario's bounds in one execution.
type budget struct {
	faults, late, events, losses, stale int
}

func (b *budget) spend(c eventCost) {
	b.events--
	if c == costLoss {
		b.losses--
	}
}

// System is one execution of a scenario: the model API server, the actors
// running the real code against it, the adversary, and the checker.
type System struct {
	mu      sync.Mutex
	sc      *Scenario
	store   *apimodel.Store
	gate    *gate
	late    []*apimodel.Request
	budget  budget
	checker *checker
	// floors is, per actor and object, the newest revision the actor's
	// cache has shown it: a cache never goes back in time.
	floors map[string]map[apimodel.Key]int64
	// history is, per actor, a digest of everything it was told: its code
	// is deterministic, so equal digests mean equal states.
	history map[string]*actorHistory
	// outstanding and rounds count, per actor, the requests not answered
	// yet and the rounds of requests issued together.
	outstanding map[string]int
	rounds      map[string]int
	running     map[string]bool
	// snap is the snapshot of revision snapRev.
	snap    *snapshot
	snapRev int64
	aborted bool
	trace   []string
	tokens  map[string]int
	// backup is the namespace's backup, once taken; restored tells that it
	// was restored.
	backup   *backup
	restored bool
	// reverted tells that the grant register went back to an earlier
	// value (RevertRegister): a restore of the register alone.
	reverted bool
	// pending are the backup's Machines a restore that brings the
	// Cluster first has yet to bring back, and pendingBefore the UIDs the
	// Machines had before it.
	pending       []*unstructured.Unstructured
	pendingBefore map[string]types.UID
	// auto serves every request at once, in the liveness probe.
	auto   bool
	autoMu sync.Mutex
	// stepFP is what the actors did, beyond the choice itself, in the step
	// under way (footprint.go).
	stepFP footprint
	// machineNames and actorNames number the Machines and actors for
	// footprints; sym permutes interchangeable Machines (symmetry.go).
	machineNames, actorNames []string
	sym                      *symmetry
}

// adversaryState is what of the adversary's past the future depends on,
// beyond the store and the budgets.
func (s *System) adversaryState() []string {
	var lines []string
	if s.backup != nil {
		lines = append(lines, fmt.Sprintf("backup %s restored %v machines pending %d", s.backup.digest, s.restored, len(s.pending)))
	}
	if s.reverted {
		lines = append(lines, "register reverted")
	}
	// A delete a Lock call issued must not delete the lock it began with.
	for _, r := range s.late {
		if uid, ok := s.checker.origin[r]; ok {
			lines = append(lines, fmt.Sprintf("late %s %s from a call that began with lock %s", r.Actor, s.canonical(r), uid))
		}
	}
	for _, p := range s.gate.pending {
		if uid, ok := s.checker.origin[p.req]; ok && p.req != nil {
			lines = append(lines, fmt.Sprintf("pending %s %s from a call that began with lock %s", p.req.Actor, s.canonical(p.req), uid))
		}
	}
	return lines
}

func newSystem(sc *Scenario, initial *System) *System {
	s := &System{
		sc:          sc,
		store:       apimodel.NewStore(),
		budget:      budget{faults: sc.Faults, late: sc.Late, events: sc.Events, losses: sc.Losses, stale: sc.StaleReads},
		floors:      map[string]map[apimodel.Key]int64{},
		history:     map[string]*actorHistory{},
		outstanding: map[string]int{},
		rounds:      map[string]int{},
		running:     map[string]bool{},
		tokens:      map[string]int{},
	}
	s.gate = &gate{sys: s}
	s.checker = &checker{}
	if sc.Guard {
		s.store.SetGuard(lockGuard())
	}
	s.machineNames = sc.machines()
	for _, p := range sc.Providers {
		s.actorNames = append(s.actorNames, p.actor())
	}
	s.actorNames = append(s.actorNames, "manager", "operator", relinkerActor)
	s.machineNames = append(s.machineNames, sc.Relink...)
	if initial != nil {
		s.sym = initial.sym
		s.store = initial.store.Clone()
		s.checker.grants = append(s.checker.grants, initial.checker.grants...)
		return s
	}
	s.sym = newSymmetry(sc)
	// The starting objects were created a grace period before the
	// execution: what is created during it is young.
	s.store.SetNow(start.Add(-keeper.DefaultPolicy().OrphanGrace))
	s.setUp()
	s.store.SetNow(start)
	return s
}

// setUp creates the starting objects.
func (s *System) setUp() {
	cl := kubeenv.NewCluster("v1beta2", namespace, clusterName)
	if s.sc.Annotated {
		cl.SetAnnotations(map[string]string{"example.com/owner": "team-a"})
	}
	s.mustCreate(clusterKey, cl.Object)
	for _, m := range s.sc.machines() {
		s.mustCreate(machineKey(m), kubeenv.NewMachine("v1beta2", namespace, clusterName, m).Object)
	}
	if m := s.sc.GrantHolder; m != "" {
		grant := `{"machineName":"` + m + `","token":"restored"}`
		s.store.Mutate(clusterKey, func(o map[string]any) { setAnnotation(o, wire.GrantAnnotation, &grant) })
	}
	if s.sc.UpstreamHolder != "" {
		s.createLock(kubeenv.NewLock(namespace, clusterName, s.sc.UpstreamHolder, s.liveCluster()))
		s.checker.upstream(s, s.sc.UpstreamHolder)
	}
	if m := s.sc.LibraryHolder; m != "" {
		s.setUpLibraryHolder(m)
	}
	if len(s.sc.Relink) > 0 {
		s.setUpRelink()
	}
	for _, k := range s.sc.Before {
		evs := s.eventsOf(k)
		if len(evs) == 0 {
			panic(fmt.Sprintf("explore: event %s cannot happen at the start of scenario %s", k, s.sc.Name))
		}
		evs[0].run(s)
	}
}

// setUpLibraryHolder grants Machine m the lock as pkg/initlock does: the
// register and the lock, owned by the Cluster, name it by UID with one
// token.
func (s *System) setUpLibraryHolder(m string) {
	sn := s.snapshot()
	ref := wire.Ref{MachineName: m, MachineUID: sn.machines[m].UID, ClusterUID: sn.cluster.UID}
	rec, err := json.Marshal(wire.Record{Ref: ref, Token: "granted-t0"})
	if err != nil {
		panic(err)
	}
	val := string(rec)
	s.store.Mutate(clusterKey, func(o map[string]any) { setAnnotation(o, wire.GrantAnnotation, &val) })
	lock := kubeenv.NewLock(namespace, clusterName, m, s.liveCluster())
	lock.Data[wire.DataKey] = val
	s.createLock(lock)
	s.checker.grants = append(s.checker.grants, grant{machine: m, uid: ref.MachineUID, register: true, lock: true})
}

// lockGuard is the project's lock guard, compiled once.
var lockGuard = sync.OnceValue(func() *apimodel.Guard {
	g, err := apimodel.LockGuard()
	if err != nil {
		panic(fmt.Sprintf("explore: the lock guard: %v", err))
	}
	return g
})

func (s *System) mustCreate(k apimodel.Key, obj map[string]any) {
	if _, err := s.store.Create(k, obj); err != nil {
		panic(err)
	}
}

// createLock creates lock, the lock ConfigMap, in the store.
func (s *System) createLock(lock *corev1.ConfigMap) {
	obj, err := runtime.DefaultUnstructuredConverter.ToUnstructured(lock)
	if err != nil {
		panic(err)
	}
	s.mustCreate(lockKey, obj)
}

// liveCluster is the live Cluster, to own the locks the scenario starts
// with.
func (s *System) liveCluster() *unstructured.Unstructured {
	return &unstructured.Unstructured{Object: s.store.Peek(clusterKey)}
}

// client returns a gated client of the model for actor.
func (s *System) client(actor string) *apimodel.Client {
	return &apimodel.Client{Store: s.store, Gate: s.gate, Actor: actor}
}

// token is the deterministic token source of an actor's Locker.
func (s *System) token(actor string) func() string {
	return func() string {
		s.mu.Lock()
		defer s.mu.Unlock()
		s.tokens[actor]++
		return fmt.Sprintf("%s-t%d", actor, s.tokens[actor])
	}
}

// branch asks the scheduler to pick one of ways at a point of actor's
// script; once the execution is aborted, the last way (which ends the
// script) is taken.
func (s *System) branch(actor, what string, ways ...string) int {
	return s.choose(actor, what, false, ways)
}

// wait makes actor wait until the scheduler lets it go on.
func (s *System) wait(actor, what string) {
	s.choose(actor, what, true, []string{"goes"})
}

func (s *System) choose(actor, what string, wait bool, ways []string) int {
	if s.isAborted() || s.isAuto() {
		return len(ways) - 1
	}
	p := &pending{branch: &branchPoint{actor: actor, what: what, ways: ways, wait: wait}, done: make(chan struct{})}
	s.gate.add(p)
	<-p.done
	return p.branch.chosen
}

func (s *System) isAuto() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.auto
}

func (s *System) isAborted() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.aborted
}

// abort ends the execution: every actor is answered at once, with an error,
// until its script ends.
func (s *System) abort() {
	s.mu.Lock()
	s.aborted = true
	pend := s.gate.pending
	s.gate.pending = nil
	s.mu.Unlock()
	for _, p := range pend {
		s.release(p)
	}
}

func (s *System) release(p *pending) {
	switch {
	case p.branch != nil:
		p.branch.chosen = len(p.branch.ways) - 1
	case p.req != nil:
		p.req.Err = context.Canceled
	}
	close(p.done)
}

func (s *System) actorStarted(name string) {
	s.mu.Lock()
	s.running[name] = true
	s.mu.Unlock()
}

func (s *System) actorDone(name string) {
	s.mu.Lock()
	s.running[name] = false
	s.checker.callEnded(name)
	s.stepFP = s.stepFP.union(hookDone)
	s.mu.Unlock()
	s.forget(name, "done")
}

// forget replaces what actor was told by what of it its future depends
// on, at a point of its script where that is all (Forget): a finished
// actor's past, and its caches, count for nothing.
func (s *System) forget(actor, what string) {
	if s.sc.Off&Forget != 0 {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if what == "done" {
		delete(s.floors, actor)
	} else {
		what += fmt.Sprintf(" tokens %d", s.tokens[actor])
	}
	h := &actorHistory{round: -1}
	h.open = []string{what}
	h.close()
	s.history[actor] = h
}

func (s *System) anyRunning() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, r := range s.running {
		if r {
			return true
		}
	}
	return false
}

// snapshot is the live state the checker judges a write against, read
// as documented (kubeenv/wire), not as the engine reads it.
type snapshot struct {
	cluster *clusterState
	lock    *wire.Lock
	// machines by name
	machines map[string]*machineState
}

// clusterState is what the checker and the events need of the Cluster.
type clusterState struct {
	UID                           types.UID
	Paused, Initialized, Deleting bool
	Grant                         *wire.Grant
}

// machineState is a Machine that exists.
type machineState struct {
	UID types.UID
}

// snapshot returns the live state, computed once per revision of the
// store.
func (s *System) snapshot() snapshot {
	rev := s.store.Revision()
	if s.snap != nil && s.snapRev == rev {
		return *s.snap
	}
	sn := snapshot{machines: map[string]*machineState{}}
	if obj := s.store.Peek(clusterKey); obj != nil {
		u := &unstructured.Unstructured{Object: obj}
		_, annotated := u.GetAnnotations()["cluster.x-k8s.io/paused"]
		paused, _, _ := unstructured.NestedBool(obj, "spec", "paused")
		initialized, _, _ := unstructured.NestedBool(obj, "status", "initialization", "controlPlaneInitialized")
		sn.cluster = &clusterState{UID: u.GetUID(), Paused: paused || annotated, Initialized: initialized,
			Deleting: u.GetDeletionTimestamp() != nil, Grant: wire.GrantFrom(u.GetAnnotations())}
	}
	if obj := s.store.Peek(lockKey); obj != nil {
		cm := &corev1.ConfigMap{}
		if err := runtime.DefaultUnstructuredConverter.FromUnstructured(obj, cm); err != nil {
			panic(err)
		}
		lk := wire.LockOf(cm, clusterName)
		sn.lock = &lk
	}
	for _, k := range s.store.Keys() {
		if k.Kind != "Machine" {
			continue
		}
		meta := s.store.Peek(k)["metadata"].(map[string]any)
		sn.machines[k.Name] = &machineState{UID: typesUID(meta["uid"])}
	}
	s.snap, s.snapRev = &sn, rev
	return sn
}

func gr(kind string) schema.GroupResource {
	if kind == "ConfigMap" {
		return schema.GroupResource{Resource: "configmaps"}
	}
	return schema.GroupResource{Group: "cluster.x-k8s.io", Resource: strings.ToLower(kind) + "s"}
}

func typesUID(v any) types.UID {
	s, _ := v.(string)
	return types.UID(s)
}
