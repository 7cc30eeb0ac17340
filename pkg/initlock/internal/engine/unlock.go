package engine

import (
	"context"
	"errors"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/initlock/initlock/pkg/initlock/capi"
	"github.com/initlock/initlock/pkg/initlock/internal/report"
)

// UnlockParams qualifies an Unlock. The zero value is a Machine's release
// of its own lock.
type UnlockParams struct {
	// AnyHolder releases the lock whoever holds it, and a corrupt lock or
	// a damaged register too; machine may then be nil.
	AnyHolder bool
	// UID and ResourceVersion, when set, are what the lock must still be:
	// otherwise Unlock returns a Conflict error and changes nothing.
	UID             types.UID
	ResourceVersion string
	// NoLock tells that the caller found no lock: otherwise, when Unlock
	// first reads one, it returns a Conflict error and changes nothing. A
	// lock another Machine created since is never released on what was
	// inspected without it.
	NoLock bool
	// Register, when set, is what the Cluster's grant register must still
	// hold (Grant.Raw; "" for an absent register) when Unlock first reads
	// it: otherwise Unlock returns a Conflict error and changes nothing.
	Register *string
	// Operator makes Unlock decide as an operator's release
	// (IntentRelease), as kubectl initlock release does: whoever holds the
	// lock (it implies AnyHolder).
	Operator bool
	// Force, with Operator, releases the lock even when the release needs
	// it (Decision.NeedsForce): the Machine the lock or the grant register
	// names exists and the control plane is not initialised. Without it,
	// an operator's release reads those Machines live in each round, and
	// again between the lock's release mark and its delete, and stops
	// (initlock.ErrNotHolder; the mark taken off again) once one exists: a
	// holder restored while the release runs keeps its lock. A Machine of
	// the holder's name stops it whatever its UID: a holder restored alone,
	// while the Cluster keeps its UID, comes back under a new one
	// (Ref.Claims). A reading or a delete that fails after the mark
	// stops the round too, and the mark comes off. When taking the mark
	// off fails (another writer changed the lock, or the request failed),
	// the release reads the lock again and takes its mark off again while
	// the lock carries it (takeMarkOff); only when every try fails does the
	// mark stay until a keeper takes it off (ReleaseMarkGrace after it was
	// written, once the Cluster is not paused, or a kubectl initlock
	// repair), the lock guard letting a delete of that lock through
	// meanwhile.
	Force bool
}

// Unlock releases cluster's lock held by machine. When the Cluster's grant
// register names the holder, Unlock first retires that grant (a new token
// for the same Machine, so that no earlier acquisition is relied on while
// the release is under way), then withdraws it, then deletes the lock, one
// write after the other, each once the one before is written; a lock alone
// is deleted. Every write is conditional on what was read: the register by
// compare-and-swap (which also tests that the Cluster is not paused), the
// lock by its UID and resourceVersion. The holder is matched by UID while
// the Cluster keeps the UID recorded; records without UIDs (upstream ones,
// or written before a restore or move) are matched by name.
//
// Unlock reads machine live, after the lock and the Cluster, and refuses an
// object whose UID is not the live Machine's (initlock.ErrStaleMachine), and a
// cluster object whose UID is not the live Cluster's (initlock.ErrStaleCluster):
// an object from before a restore or move never releases what the restored
// Machine holds. A missing lock and an empty register are success. Unlock
// never deletes a ConfigMap that is not a lock (initlock.ErrNotALock), a lock it
// cannot read (initlock.ErrCorruptLock, unless AnyHolder) or a lock another Machine
// holds (initlock.ErrNotHolder, unless AnyHolder), and starts nothing while the
// Cluster is paused (initlock.ErrClusterPaused). The register's writes test
// the pause: one landing between the retire and the withdraw stops the
// release there, the grant retired, the lock kept. The lock's writes
// cannot: one landing after the register's writes, or, when there is no
// grant to retire, after the reading, does not stop the lock's release.
// Once the control plane is initialised the register no longer counts and
// is left as it is.
//
// A release of whoever holds the lock (AnyHolder, Operator) is bound to
// what its first read found (Observation.Pinned): a later round, after a
// race lost or a write whose answer was lost, releases only that lock (the
// same UID and record) and that grant (or the one it wrote since), never a
// lock or grant another call made meanwhile, and ends as done when they
// are gone.
func (l *Env) Unlock(ctx context.Context, cluster, machine client.Object, p UnlockParams) error {
	o := unlockOptions{anyHolder: p.AnyHolder || p.Operator, uid: p.UID, resourceVersion: p.ResourceVersion,
		noLock: p.NoLock, register: p.Register, intent: IntentUnlock, force: p.Force}
	if p.Operator {
		o.intent = IntentRelease
	}
	cl, err := ClusterFrom(cluster, l.Client.Scheme())
	if err != nil {
		return err
	}
	lockName, err := LockName(cl.Name)
	if err != nil {
		return err
	}
	var m *Machine
	switch {
	case machine != nil && !o.anyHolder:
		mm, err := machineFrom(machine, l.Client.Scheme())
		if err != nil {
			return err
		}
		m = &mm
	case !o.anyHolder:
		return fmt.Errorf("unlocking %s/%s: no machine given; pass one or use AnyHolder", cl.Namespace, lockName)
	}
	r := &release{l: l, clusterObj: cluster, cl: cl, m: m, lockName: lockName, opts: o}
	return r.run(ctx)
}

// release is one Unlock call.
type release struct {
	l          *Env
	clusterObj client.Object
	cl         Cluster
	m          *Machine
	lockName   string
	opts       unlockOptions
	tokens     []string
	// markedLock is the lock this call wrote its release mark on, or tried
	// to, when it reads the holder again before its delete.
	markedLock types.UID
	// pinnedLock and pinnedRegister are what the first read found
	// (Observation.Pinned).
	pinnedLock     *Lock
	pinnedRegister string
}

// run releases in rounds. Each round decides on what the last round's
// writes left, or on a fresh reading, and makes one step of the release:
// the register's write, or the lock's release mark and delete. It ends
// when the decision has nothing left to write or refuses; a round whose
// write lost a race, or failed without telling whether it was applied,
// is followed by another.
func (r *release) run(ctx context.Context) error {
	cl, lockName := r.cl, r.lockName
	var known *Observation // what the last round's writes left, when known
	var cm *corev1.ConfigMap
	var last error // the error of the latest round that failed with one
	for attempt := range maxAttempts {
		var obs Observation
		var err error
		if obs, cm, err = r.observe(ctx, cl, attempt, known, cm); err != nil {
			return err
		}
		known = nil
		d := Decide(obs, Policy{}, r.l.Clock.Now())
		if obs.Cluster != nil {
			r.cl = *obs.Cluster
		}
		if stop, err := r.stops(ctx, cm, obs, d); stop {
			return err
		}
		after, err := r.write(ctx, cm, obs, d)
		switch {
		case err == nil && d.Register != RegisterNone:
			// The register is written: go on from the Cluster the API
			// server answered and the lock as read (withdraw the retired
			// grant, then delete the lock). An operator's release made
			// without Force reads them all again instead, the Machines
			// too: one back since the retire stops it before the
			// withdraw, as one back since the mark stops the delete.
			if !r.opts.checksForce() {
				obs.Cluster, known = after, &obs
			}
			continue
		case err == nil:
			if cm != nil && d.Action == ActionRelease {
				r.l.event(r.clusterObj, corev1.EventTypeNormal, report.EventLockReleased, "Init lock held by %s released", d.Holder)
			}
			return nil
		case fatal(err) || errors.Is(err, report.ErrNotHolder):
			return err
		}
		last = err
	}
	return unsettled(cl.Namespace, lockName, last)
}

// observe returns what round attempt decides on, and the lock as read: what
// the last round's writes left (known), with the lock cm read then, or else
// the lock, the Cluster and the caller's Machine read live from cl's
// namespace and name. The first round checks them against what the caller
// inspected (unchanged) and pins them: a later round of a release of
// whoever holds the lock releases only what the first found
// (Observation.Pinned).
func (r *release) observe(ctx context.Context, cl Cluster, attempt int, known *Observation, cm *corev1.ConfigMap) (Observation, *corev1.ConfigMap, error) {
	var obs Observation
	if known != nil {
		obs = *known
	} else {
		var err error
		intent := IntentUnlock
		if r.opts.checksForce() {
			intent = IntentRelease // reads the holder and the grantee too
		}
		obs, cm, err = Read(ctx, From(r.l.Reader), Query{Namespace: cl.Namespace, ClusterName: cl.Name,
			APIVersion: cl.APIVersion, Intent: intent, Caller: r.m})
		if err != nil {
			return obs, cm, fmt.Errorf("unlocking %s/%s: %w", cl.Namespace, r.lockName, err)
		}
		obs.Intent = r.opts.intent
	}
	if attempt == 0 {
		if err := r.unchanged(cm, obs.Cluster); err != nil {
			return obs, cm, err
		}
		obs.CallerCluster = r.cl.UID
		r.pinnedLock, r.pinnedRegister = obs.Lock, ""
		if obs.Cluster != nil {
			r.pinnedRegister = obs.Cluster.Grant.Raw()
		}
	} else {
		obs.Pinned, obs.PinnedLock, obs.PinnedRegister = true, r.pinnedLock, r.pinnedRegister
	}
	obs.Caller, obs.Tokens, obs.Force = r.m, r.tokens, r.opts.force
	return obs, cm, nil
}

var clusterResource = schema.GroupResource{Group: capi.Group, Resource: "clusters"}

// unchanged checks the lock and the register against UnlockParams UID,
// ResourceVersion and Register.
func (r *release) unchanged(cm *corev1.ConfigMap, cl *Cluster) error {
	if r.opts.uid != "" && (cm == nil || cm.UID != r.opts.uid || cm.ResourceVersion != r.opts.resourceVersion) {
		return apierrors.NewConflict(corev1.Resource("configmaps"), r.lockName,
			fmt.Errorf("lock %s/%s changed since it was inspected; look at it again", r.cl.Namespace, r.lockName))
	}
	if r.opts.noLock && cm != nil {
		return apierrors.NewConflict(corev1.Resource("configmaps"), r.lockName,
			fmt.Errorf("lock %s/%s was created since none was found; look at it again", r.cl.Namespace, r.lockName))
	}
	if r.opts.register != nil {
		raw := ""
		if cl != nil {
			raw = cl.Grant.Raw()
		}
		if raw != *r.opts.register {
			return apierrors.NewConflict(clusterResource, r.cl.Name,
				fmt.Errorf("the grant register of cluster %s/%s changed since it was inspected; look at it again", r.cl.Namespace, r.cl.Name))
		}
	}
	return nil
}

// stops tells whether decision d ends the release without a write, and
// with what error: the refusal d decided, told to the caller, or nil when
// nothing is left to write.
func (r *release) stops(ctx context.Context, cm *corev1.ConfigMap, obs Observation, d Decision) (bool, error) {
	switch {
	case errors.Is(d.Err, report.ErrStaleCluster):
		return true, staleClusterError(r.cl, obs.Cluster)
	case errors.Is(d.Err, report.ErrStaleMachine):
		return true, staleMachineError(*r.m, obs.CallerLive, "nothing was released")
	case errors.Is(d.Err, errChangedSince):
		return true, apierrors.NewConflict(corev1.Resource("configmaps"), r.lockName,
			fmt.Errorf("the lock %s/%s or the grant register of cluster %s changed since the release read them; look at them again", r.cl.Namespace, r.lockName, r.cl.Name))
	case errors.Is(d.Err, errNeedsForce):
		// A mark of this call's, written in an earlier round whose
		// answer was lost, is taken off: the lock is held again.
		return true, errors.Join(r.needsForceError(d, obs.Lock != nil), r.unmarkOwn(ctx, cm))
	case errors.Is(d.Err, report.ErrNotHolder):
		return true, &report.Error{Namespace: r.cl.Namespace, Name: r.lockName, Kind: "configmap", Err: report.ErrNotHolder,
			Detail: notHolderDetail(obs, d, *r.m)}
	case errors.Is(d.Err, report.ErrClusterPaused):
		return true, pausedError(r.cl)
	case d.Err != nil:
		return true, lockError(r.cl.Namespace, r.lockName, d.Err)
	case !d.Writes():
		return true, nil
	}
	return false, nil
}

// staleClusterError is Decide's initlock.ErrStaleCluster for a release made with
// cluster object passed, while live is the Cluster of that name.
func staleClusterError(passed Cluster, live *Cluster) error {
	return &report.Error{Namespace: passed.Namespace, Name: passed.Name, Kind: "cluster", Err: report.ErrStaleCluster,
		Detail: fmt.Sprintf("the object passed has UID %s, but the live Cluster of that name has UID %s (deleted and created again, restored or moved); nothing was released: call again with the live Cluster", passed.UID, live.UID)}
}

// notHolderDetail says who holds the lock, by UID when the names agree.
func notHolderDetail(obs Observation, d Decision, m Machine) string {
	holder := d.Holder
	if obs.Lock != nil && holder == m.Name {
		holder = fmt.Sprintf("machine %s of UID %s (another incarnation)", holder, obs.Lock.Record.MachineUID)
		return fmt.Sprintf("it is held by %s, not by machine %s of UID %s; use AnyHolder to release it anyway", holder, m.Name, m.UID)
	}
	return fmt.Sprintf("it is held by %s, not %s; use AnyHolder to release it anyway", holder, m.Name)
}
