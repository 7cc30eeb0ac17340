package engine

import (
	"context"
	"errors"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

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
	// holder restored while the release runs keeps its lock. A Machine
	// created again under the holder's name, while the Cluster keeps its
	// UID, is another Machine (the record names its holder by UID) and
	// stops nothing. A reading or a delete that fails after the mark
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

// unlockOptions are an Unlock's parameters as the release uses them.
type unlockOptions struct {
	anyHolder       bool
	uid             types.UID
	resourceVersion string
	noLock          bool
	register        *string
	intent          Intent
	force           bool
}

// checksForce tells whether the release is an operator's made without
// Force: it reads the Machines the lock and the register name, and stops
// once one exists.
func (o unlockOptions) checksForce() bool { return o.intent == IntentRelease && !o.force }

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

func (r *release) run(ctx context.Context) error {
	cl, lockName := r.cl, r.lockName
	var known *Observation // what the last round's writes left, when known
	var cm *corev1.ConfigMap
	var last error // the error of the latest round that failed with one
	for attempt := range maxAttempts {
		var obs Observation
		if known != nil {
			obs, known = *known, nil
		} else {
			var err error
			intent := IntentUnlock
			if r.opts.checksForce() {
				intent = IntentRelease // reads the holder and the grantee too
			}
			obs, cm, err = Read(ctx, From(r.l.Reader), Query{Namespace: cl.Namespace, ClusterName: cl.Name,
				APIVersion: cl.APIVersion, Intent: intent, Caller: r.m})
			if err != nil {
				return fmt.Errorf("unlocking %s/%s: %w", cl.Namespace, lockName, err)
			}
			obs.Intent = r.opts.intent
		}
		if attempt == 0 {
			if err := r.unchanged(cm, obs.Cluster); err != nil {
				return err
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
		d := Decide(obs, Policy{}, r.l.Clock.Now())
		if obs.Cluster != nil {
			r.cl = *obs.Cluster
		}
		switch {
		case errors.Is(d.Err, report.ErrStaleCluster):
			return staleClusterError(r.cl, obs.Cluster)
		case errors.Is(d.Err, report.ErrStaleMachine):
			return staleMachineError(*r.m, obs.CallerLive, "nothing was released")
		case errors.Is(d.Err, errChangedSince):
			return apierrors.NewConflict(corev1.Resource("configmaps"), r.lockName,
				fmt.Errorf("the lock %s/%s or the grant register of cluster %s changed since the release read them; look at them again", r.cl.Namespace, r.lockName, r.cl.Name))
		case errors.Is(d.Err, errNeedsForce):
			// A mark of this call's, written in an earlier round whose
			// answer was lost, is taken off: the lock is held again.
			return errors.Join(r.needsForceError(d, obs.Lock != nil), r.unmarkOwn(ctx, cm))
		case errors.Is(d.Err, report.ErrNotHolder):
			return &report.Error{Namespace: cl.Namespace, Name: lockName, Kind: "configmap", Err: report.ErrNotHolder,
				Detail: notHolderDetail(obs, d, *r.m)}
		case errors.Is(d.Err, report.ErrClusterPaused):
			return pausedError(r.cl)
		case d.Err != nil:
			return lockError(cl.Namespace, lockName, d.Err)
		case !d.Writes():
			return nil
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

// write makes one step of a release: the register's write when the
// decision has one, or else the lock's release (its release mark, then its
// delete). It returns the Cluster as the register's write left it; the
// next step decides on it, with the lock as read.
func (r *release) write(ctx context.Context, cm *corev1.ConfigMap, obs Observation, d Decision) (*Cluster, error) {
	if d.Register == RegisterNone {
		if cm != nil && d.Action == ActionRelease {
			if err := r.releaseLock(ctx, cm, obs); err != nil {
				return nil, fmt.Errorf("releasing lock %s/%s: %w", r.cl.Namespace, r.lockName, err)
			}
		}
		return nil, nil
	}
	token := r.l.Tokens()
	r.tokens = append(r.tokens, token)
	value := releasedGrant(token, r.l.Clock.Now())
	if d.Register == RegisterRetire {
		value = retiredGrant(obs.Cluster.Grant, token)
	}
	u, err := writeRegister(ctx, r.l.Client, r.cl, value)
	if err != nil {
		err = fmt.Errorf("releasing the init-lock grant on cluster %s/%s: %w", r.cl.Namespace, r.cl.Name, err)
		if apierrors.IsForbidden(err) {
			err = fmt.Errorf("%w; releasing needs \"get\" and \"patch\" on \"clusters.cluster.x-k8s.io\"", err)
		}
		return nil, err
	}
	syncCaller(r.clusterObj, u)
	after, err := ClusterFrom(u, nil)
	if err != nil {
		return nil, fmt.Errorf("releasing the init-lock grant on cluster %s/%s: the API server's answer is not a Cluster: %w", r.cl.Namespace, r.cl.Name, err)
	}
	return &after, nil
}

// releaseLock deletes lock cm: its release mark, then its delete. An
// operator's release made without Force reads the Machines the lock and
// the register name again between the two, after the mark, and decides
// again: a holder restored since the round's reading stops it, and the
// mark is taken off again, as a keeper's release does (Keep).
func (r *release) releaseLock(ctx context.Context, cm *corev1.ConfigMap, obs Observation) error {
	now := r.l.Clock.Now()
	if !r.opts.checksForce() {
		return releaseLock(ctx, r.l.Client, cm, now)
	}
	r.markedLock = cm.UID
	return releaseChecked(ctx, r.l.Reader, r.l.Client, cm, now, func(marked *corev1.ConfigMap) (bool, error) {
		again := obs
		again.Lock = ObserveLock(marked, r.cl.Name)
		granted := ""
		if g := grantThatCounts(again.Cluster); g.Held() {
			granted = g.MachineName
		}
		found, err := getMachines(ctx, r.l.Reader, r.cl.APIVersion, r.cl.Namespace, nil, nil, again.Lock.Record.MachineName, granted)
		if err != nil {
			return true, fmt.Errorf("reading its holder again once marked: %w", err)
		}
		again.Holder, again.Granted = found[again.Lock.Record.MachineName], found[granted]
		if d := Decide(again, Policy{}, now); d.NeedsForce {
			return true, r.needsForceError(d, true)
		}
		return false, nil
	})
}

// needsForceError is the refusal of an operator's release, made without
// Force, that decision d says needs it; with no lock (lockFound false), the
// grant register is what names the Machine.
func (r *release) needsForceError(d Decision, lockFound bool) error {
	const after = " and the control plane is not initialised: kubeadm init may be running there; nothing was released (Force releases it anyway)"
	e := &report.Error{Namespace: r.cl.Namespace, Name: r.lockName, Kind: "configmap", Err: report.ErrNotHolder}
	switch {
	case lockFound && d.ForceReason != "":
		e.Detail = fmt.Sprintf("machine %s, which it names, exists", d.ForceReason) + after
	case lockFound:
		e.Detail = "a Machine it names exists" + after
	case d.ForceReason != "":
		e.Name, e.Kind = r.cl.Name, "cluster"
		e.Detail = fmt.Sprintf("its lock is missing, but its grant register (annotation %s) names machine %s, which exists,", GrantAnnotation, d.ForceReason) + after
	default:
		e.Name, e.Kind = r.cl.Name, "cluster"
		e.Detail = fmt.Sprintf("its lock is missing and its grant register (annotation %s) is damaged, so the Machine it granted is unknown,", GrantAnnotation) + after
	}
	return e
}

// unmarkOwn takes off lock cm, as read, the release mark this call wrote
// on it in an earlier round (its answer lost, or its delete failed), with
// the marks that go with it; nil when cm carries no mark of this call's.
func (r *release) unmarkOwn(ctx context.Context, cm *corev1.ConfigMap) error {
	if cm == nil || cm.UID != r.markedLock || !marked(cm) {
		return nil
	}
	if err := takeMarkOff(ctx, r.l.Reader, r.l.Client, cm); err != nil {
		return fmt.Errorf("taking the release mark off lock %s/%s again: %w", r.cl.Namespace, r.lockName, err)
	}
	return nil
}
