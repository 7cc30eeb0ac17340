package explore

// The checks made as the model API server serves each request: a reconcile
// of the manager begins or ends, a delete removes the lock, a write is
// applied, a read is served or a request is issued.

import (
	"maps"
	"reflect"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"

	"github.com/initlock/initlock/internal/kubeenv/apimodel"
	"github.com/initlock/initlock/internal/kubeenv/wire"
	"github.com/initlock/initlock/pkg/initlock/capi"
)

func (c *checker) reconcileStarted(s *System) {
	s.mu.Lock()
	defer s.mu.Unlock()
	c.reconciling, c.pausedSeen = true, false
	c.liveUIDs = map[types.UID]bool{}
	c.observe(s)
}

func (c *checker) reconcileEnded(s *System) {
	s.mu.Lock()
	defer s.mu.Unlock()
	c.reconciling, c.pausedSeen = false, false
	c.liveUIDs = nil
	c.callEnded("manager")
}

// lockRemoved judges a delete that removed the lock (before is the lock as
// it was), whoever made it: with the lock guard installed, the Machine the
// lock named must be gone, have released it, or the Cluster be gone or
// initialised. Without the guard an upstream provider's lock is as
// unprotected as upstream's: the grants it alone protected end.
func (c *checker) lockRemoved(s *System, before map[string]any, by string) {
	if !s.sc.Guard {
		c.drop(func(g grant) bool { return g.upstream })
		return
	}
	cm := &corev1.ConfigMap{}
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(before, cm); err != nil {
		panic(err)
	}
	lk, sn := wire.LockOf(cm, clusterName), s.snapshot()
	if lk.Err != nil || sn.cluster == nil || sn.cluster.Initialized {
		return
	}
	holder := lk.Record.MachineName
	if by == "operator" && s.sc.OperatorForce && lk.UID == c.forced {
		// A forced release removes what its operator inspected, whoever
		// holds it: a loss the operator chose.
		c.lockDeleted()
		return
	}
	if c.inWindow(by, lk) {
		return
	}
	if m := sn.machines[holder]; m != nil && c.names(lk.Record.Ref, sn.cluster.UID, holder, m.UID) && c.releasing[holder] == "" {
		c.violate(InvHeldLock, "%s removed lock %s while machine %s, which it names, exists, has not released it, and the control plane is not initialised", by, lk.UID, holder)
	}
	// A Machine a restore is still bringing back exists for the promise:
	// its lock is held as if the Machine were there.
	if m := s.pendingMachine(holder); m != nil && sn.machines[holder] == nil && c.releasing[holder] == "" {
		c.violate(InvHeldLock, "%s removed lock %s while machine %s, which it names, was still being restored, and the control plane is not initialised", by, lk.UID, holder)
	}
}

// inWindow tells whether a removal of lock lk by `by` falls in the window
// docs/design.md accepts ("A holder restored between the manager's last
// live read and its delete"): the Machine the lock names came back after
// the releaser last saw it, and the releaser deletes it, or another's
// delete passes with the releaser's mark while its release is under way.
// A mark left once the releaser's call is over is no longer in it, and a
// releaser that has seen the Machine since deletes outside it, its mark
// or not.
func (c *checker) inWindow(by string, lk wire.Lock) bool {
	if c.backUnseen[by] {
		return true
	}
	return c.marker != "" && c.marker != by && c.markerBack && lk.Releasable
}

// marks follows the release marks actors write, in a scenario where the
// holder may come back: the latest lock write of actor that put its own
// release mark on the lock makes it the marker; a write that leaves none
// ends the marker.
func (c *checker) marks(s *System, actor string, before, after map[string]any) {
	if !slices.Contains(s.sc.Adversary, MachineBack) {
		return
	}
	had, has := ownMark(before), ownMark(after)
	switch {
	case has && !had:
		c.marker, c.markerBack = actor, c.backUnseen[actor]
	case !has:
		c.marker, c.markerBack = "", false
	}
}

// grantKept checks a write of the grant register by the operator's
// release made without --force: once it has retired a grant (the first of
// its two writes), it reads the Machine the grant names again before it
// withdraws it, and it never takes the grant off a Machine that exists
// while the control plane is not initialised. A Machine back after that
// reading is the window docs/design.md accepts, as for the lock.
func (c *checker) grantKept(s *System, r *apimodel.Request, before map[string]any) {
	if r.Actor != "operator" || s.sc.OperatorForce || before == nil {
		return
	}
	g := wire.GrantFrom((&unstructured.Unstructured{Object: before}).GetAnnotations())
	sn := s.snapshot()
	if !g.Held() || sn.cluster == nil || sn.cluster.Initialized {
		return
	}
	if after := sn.cluster.Grant; after.Held() && after.MachineName == g.MachineName {
		if c.retired == nil {
			c.retired = map[string]bool{}
		}
		c.retired[r.Actor] = true
		return
	}
	if sn.machines[g.MachineName] == nil || c.backUnseen[r.Actor] && !c.retired[r.Actor] {
		return
	}
	c.violate(InvHeldLock, "%s took the grant off machine %s, which exists, while the control plane is not initialised", r.Actor, g.MachineName)
}

// hasAnnotation tells whether obj carries annotation key.
func hasAnnotation(obj map[string]any, key string) bool {
	if obj == nil {
		return false
	}
	_, ok := (&unstructured.Unstructured{Object: obj}).GetAnnotations()[key]
	return ok
}

// ownMark tells whether lock obj carries its own release mark.
func ownMark(obj map[string]any) bool {
	if obj == nil {
		return false
	}
	u := &unstructured.Unstructured{Object: obj}
	v, ok := u.GetAnnotations()[wire.ReleaseAnnotation]
	return ok && types.UID(v) == u.GetUID()
}

// observe notes the live Cluster and Machine UIDs, and checks the grants'
// protections, after every step.
func (c *checker) observe(s *System) {
	c.defended(s)
	for _, cl := range c.calls {
		c.observeMachines(s, cl.live)
	}
	if !c.reconciling {
		return
	}
	if cl := s.snapshot().cluster; cl != nil {
		c.liveUIDs[cl.UID] = true
	}
}

// applied judges a write the store just applied, against the Cluster and
// the lock as they were before it.
func (c *checker) applied(s *System, r *apimodel.Request, before [2]map[string]any) {
	if r.Actor == relinkerActor {
		if r.Key == relinkedKey && r.Verb == "patch" {
			c.relinkApplied(s, r)
		}
		return
	}
	// An upstream provider releases by name, with no precondition: what its
	// delete may remove is judged by the held-lock invariant instead.
	if machine, ok := strings.CutPrefix(r.Actor, "provider/"); ok && c.releasing[machine] != "" && r.Key.Kind != "Machine" && !s.sc.upstreamActor(r.Actor) {
		if m := s.snapshot().machines[machine]; m != nil && m.UID != c.releasing[machine] {
			c.violate(InvStaleRelease, "%s released with machine %s's object of uid %s while the live machine has uid %s: %s %s", r.Actor, machine, c.releasing[machine], m.UID, r.Verb, r.Key)
		}
	}
	switch r.Key.Kind {
	case "Machine":
		c.violate(InvOnlyLocks, "%s wrote machine %s", r.Actor, r.Key.Name)
	case "Cluster":
		if before[0] != nil && capi.IsPaused(&unstructured.Unstructured{Object: before[0]}) {
			c.violate(InvNotPaused, "%s wrote the paused cluster: %s", r.Actor, r.Body)
		}
		if !onlyRegisterChanged(s) {
			c.violate(InvOnlyLocks, "%s changed more of the cluster than its grant register: %s", r.Actor, r.Body)
		}
		c.grantKept(s, r, before[0])
	case "ConfigMap":
		if start, ok := c.origin[r]; ok && before[1] != nil && typesUID(before[1]["metadata"].(map[string]any)["uid"]) == start {
			c.violate(InvKeepHeld, "%s deleted the lock %s that existed before its Lock call began", r.Actor, start)
		}
		if r.Verb == "delete" && before[1] != nil && s.store.Peek(lockKey) == nil {
			c.lockRemoved(s, before[1], r.Actor)
		}
		after, _ := s.store.Get(lockKey)
		// A release takes off its own mark, never a move's on the lock
		// of a paused Cluster (one in the middle of a move).
		if r.Actor == c.marker && after != nil && hasAnnotation(before[1], wire.MoveAnnotation) && !hasAnnotation(after, wire.MoveAnnotation) &&
			before[0] != nil && capi.IsPaused(&unstructured.Unstructured{Object: before[0]}) {
			c.violate(InvNotPaused, "%s, taking its release mark off, took a move's delete-for-move off the lock of the paused cluster: %s", r.Actor, r.Body)
		}
		c.marks(s, r.Actor, before[1], after)
		if r.Actor != "manager" {
			return
		}
		if r.Verb == "delete" && len(c.grants) > 0 {
			c.violate(InvNoUnsafeDelete, "the manager deleted the lock while machine %s holds a grant", c.grants[0].machine)
		}
		after, err := s.store.Get(lockKey)
		if err != nil {
			return
		}
		refs := ownerUIDs(after)
		if before[1] != nil && reflect.DeepEqual(refs, ownerUIDs(before[1])) {
			return
		}
		for _, uid := range refs {
			if !c.liveUIDs[uid] {
				c.violate(InvLiveOwner, "the manager pointed the lock at cluster uid %s, which was not live while it reconciled", uid)
			}
		}
	}
}

// ownerUIDs are the UIDs of an object's Cluster ownerReferences.
func ownerUIDs(obj map[string]any) []types.UID {
	u := &unstructured.Unstructured{Object: obj}
	var out []types.UID
	for _, ref := range u.GetOwnerReferences() {
		if ref.Kind == "Cluster" {
			out = append(out, ref.UID)
		}
	}
	return out
}

// onlyRegisterChanged tells whether the last write of the Cluster changed
// nothing but its grant register.
func onlyRegisterChanged(s *System) bool {
	h := s.store.History(clusterKey)
	if len(h) < 2 {
		return true
	}
	a, b := strip(h[len(h)-2].Object), strip(h[len(h)-1].Object)
	return reflect.DeepEqual(a, b)
}

// strip gives obj without its resourceVersion and grant register, sharing
// the rest with obj: the caller only compares it.
func strip(obj map[string]any) map[string]any {
	out := maps.Clone(obj)
	meta, ok := obj["metadata"].(map[string]any)
	if !ok {
		return out
	}
	meta = maps.Clone(meta)
	out["metadata"] = meta
	delete(meta, "resourceVersion")
	if ann, ok := meta["annotations"].(map[string]any); ok {
		ann = maps.Clone(ann)
		delete(ann, wire.GrantAnnotation)
		meta["annotations"] = ann
		if len(ann) == 0 {
			delete(meta, "annotations")
		}
	}
	return out
}

// read notes what actor was told of k: obj, nil when it was not found.
func (c *checker) read(actor string, k apimodel.Key, obj map[string]any) {
	if actor == relinkerActor {
		if k.Kind == "Machine" {
			c.relinkReadOf(k.Name, obj)
		}
		return
	}
	if k.Kind == "Machine" {
		delete(c.retired, actor)
	}
	if obj != nil && k.Kind == "Machine" {
		delete(c.backUnseen, actor)
	}
	if actor == "manager" && k == clusterKey {
		c.pausedSeen = obj != nil && capi.IsPaused(&unstructured.Unstructured{Object: obj})
	}
}

// issued checks a request as the actor issues it, against the requests
// the actor has outstanding: a write of the lock and a write of the grant
// register, which tests the pause, never go out together. The manager
// never writes the lock of a Cluster it read paused and that is paused.
// It remembers which lock a delete issued in a Lock call must not delete.
func (c *checker) issued(s *System, pending []*pending, p *pending) {
	if p.req != nil && p.req.Actor == relinkerActor {
		c.relinkIssued(p.req)
		return
	}
	if p.req == nil || !p.req.Write() {
		return
	}
	if p.req.Actor == "manager" && p.req.Key == lockKey {
		s.stepFP = s.stepFP.union(footprint{read: bit(resCluster)})
		if live, _ := s.store.Get(clusterKey); c.pausedSeen && live != nil && capi.IsPaused(&unstructured.Unstructured{Object: live}) {
			c.violate(InvNotPaused, "the manager wrote the lock of the cluster it read paused: %s %s", p.req.Verb, p.req.Body)
		}
	}
	if cl := c.calls[p.req.Actor]; cl != nil && !cl.upstream && cl.lock != "" && p.req.Verb == "delete" && p.req.Key == lockKey {
		if c.origin == nil {
			c.origin = map[*apimodel.Request]types.UID{}
		}
		c.origin[p.req] = cl.lock
	}
	for _, q := range pending {
		if q.req == nil || q.req.Actor != p.req.Actor || !q.req.Write() || q.req.Key.Kind == p.req.Key.Kind {
			continue
		}
		c.violate(InvPauseTest, "%s wrote %s while its write of %s, which tests that the cluster is not paused, was in flight",
			p.req.Actor, lockOrRegister(p.req.Key), lockOrRegister(q.req.Key))
	}
}

func lockOrRegister(k apimodel.Key) string {
	if k.Kind == "Cluster" {
		return "the grant register"
	}
	return "the lock"
}
