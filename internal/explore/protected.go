package explore

import "context"

// InvProtected is checked with the lock guard installed and the manager
// running: once the actors are done and the manager has reconciled with
// every request served at once, a lock held for an existing Machine (or
// one a restore is still bringing back) of a Cluster that is gone, or not
// initialised and not paused, is protected again: the guard refuses a
// delete of it with no precondition, by a person or by the garbage
// collector. A mark left on it (a release's, or clusterctl move's
// delete-for-move) is taken off. Until the manager gets to it a mark lets
// a delete through: that window is stated in docs/design.md, and the
// scenarios that leave marks offer no delete but the collector's.
const InvProtected = "protected"

// protection checks InvProtected in a state in which every actor is done.
func (s *System) protection(ctx context.Context) {
	if !s.sc.Guard || s.sc.Reconciles == 0 || s.checker.violation != nil || !s.heldForAMachine() {
		return
	}
	s.mu.Lock()
	s.auto = true
	s.mu.Unlock()
	live := s.client("manager")
	r := reconciler(live, live)
	for range 2 {
		s.checker.reconcileStarted(s)
		_, _ = r.Reconcile(ctx, clusterRequest)
		s.checker.reconcileEnded(s)
	}
	if s.checker.violation != nil || !s.heldForAMachine() {
		return
	}
	trial := s.store.Clone()
	if err := trial.Delete(lockKey, nil, nil); err == nil || collectorDelete(trial) == nil {
		sn := s.snapshot()
		s.checker.violate(InvProtected, "lock %s, held for machine %s, which exists, may be deleted by anyone once the manager has reconciled (release mark %t, delete-for-move %t)",
			sn.lock.UID, sn.lock.Record.MachineName, sn.lock.Releasable, sn.lock.MoveMark)
	}
}

// heldForAMachine tells whether the lock is held for an existing Machine
// (or one a restore is still bringing back), which has not released it, of
// a Cluster that is gone, or not initialised and not paused.
func (s *System) heldForAMachine() bool {
	sn := s.snapshot()
	if (sn.cluster != nil && (sn.cluster.Initialized || sn.cluster.Paused)) ||
		sn.lock == nil || sn.lock.Err != nil || sn.lock.Deleting {
		return false
	}
	holder := sn.lock.Record.MachineName
	m := sn.machines[holder]
	if m == nil {
		// A Machine a restore is still bringing back holds its lock.
		m = s.pendingMachine(holder)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if m == nil || !s.checker.names(sn.lock.Record.Ref, sn.clusterUID(), holder, m.UID) {
		return false
	}
	return s.checker.releasing[holder] == ""
}
