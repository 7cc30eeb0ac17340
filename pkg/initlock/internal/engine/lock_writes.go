package engine

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"

	"github.com/initlock/initlock/pkg/initlock/internal/report"
)

// write carries out an acquiring decision: the claim of the register, with
// a fresh token, together with a read of the caller's Machine (after the
// Cluster was read), or after it when the decision says ReadCallerFirst;
// then, once both say so, the write of the lock with the same token, or
// with the claim's when the decision CompletesClaim. done tells that the
// caller holds the lock. A claim that finds the caller's object stale is
// withdrawn by the next round's decision.
func (a *acquisition) write(ctx context.Context, cm *corev1.ConfigMap, d Decision) (done bool, err error) {
	token := ""
	if d.CompletesClaim {
		token = a.cl.Grant.Token
	}
	if d.Register == RegisterClaim {
		var live *Machine
		var gerr, merr error
		if d.ReadCallerFirst {
			if live, merr = getMachine(ctx, a.l.Reader, a.cl.APIVersion, a.cl.Namespace, a.m.Name); merr == nil && sameMachine(&a.m, live) {
				token = a.token()
				gerr = a.claim(ctx, a.cl, token)
			}
		} else {
			token = a.token()
			live, gerr, merr = a.claimAndConfirm(ctx, a.cl, token)
		}
		switch {
		case merr != nil:
			return false, merr
		case !sameMachine(&a.m, live):
			return false, nil
		case gerr != nil:
			return false, a.registerError(gerr)
		}
	}
	switch d.Action {
	case ActionCreate:
		_, err = createLock(ctx, a.l.Client, a.cl, a.lockName, a.record(a.m, token))
		a.noteLockWrite(err, d, token)
	case ActionTakeOver:
		_, err = rewriteLock(ctx, a.l.Client, cm, a.cl, a.record(a.m, token))
		a.noteLockWrite(err, d, token)
	case ActionAdopt:
		_, err = adoptLock(ctx, a.l.Client, cm, a.cl)
	}
	if err != nil {
		return false, fmt.Errorf("lock %s/%s: %s for machine %s: %w", a.cl.Namespace, a.lockName, d.Action, a.m.Name, err)
	}
	return true, nil
}

// claimAndConfirm claims cl's register for the caller with token and reads
// the caller's Machine live, in parallel.
func (a *acquisition) claimAndConfirm(ctx context.Context, cl Cluster, token string) (live *Machine, gerr, merr error) {
	var wg sync.WaitGroup
	wg.Go(func() { gerr = a.claim(ctx, cl, token) })
	wg.Go(func() { live, merr = getMachine(ctx, a.l.Reader, cl.APIVersion, cl.Namespace, a.m.Name) })
	wg.Wait()
	return live, gerr, merr
}

// claim writes a grant for the caller with token into the register of cl,
// as cl was read, and keeps the caller's Cluster object in step.
func (a *acquisition) claim(ctx context.Context, cl Cluster, token string) error {
	u, err := writeRegister(ctx, a.l.Client, cl, newGrant(cl, a.m, token, a.l.Clock.Now()))
	switch {
	case err == nil:
		syncCaller(a.clusterObj, u)
	case !definite(err):
		a.claimUncertain = true
	}
	return err
}

// refused carries out a decision that does not grant the caller the lock:
// the lock is given back to the Machine the register names when it was
// lost, names a gone Machine or was written by this call, and a grant this
// call recorded is withdrawn when that is safe. A write that fails is left:
// the register decides, and the next call looks again; a withdrawal that
// lost a race (raced) is decided again on a fresh read.
func (a *acquisition) refused(ctx context.Context, cm *corev1.ConfigMap, obs Observation, d Decision) (Outcome, bool, error) {
	res := Outcome{Holder: d.Holder, Verdict: d.Verdict, Action: d.Action, Recreated: d.Recreated}
	if raced, err := a.refuse(ctx, cm, obs, d); raced || err != nil {
		return res, raced, err
	}
	switch {
	case d.Recreated:
		a.l.event(a.clusterObj, corev1.EventTypeWarning, report.EventLockRecreated, "Recreated lost init lock %s for its granted holder %s; %s was refused", a.lockName, d.Holder, a.m.Name)
	case d.Action == ActionYield:
		a.l.event(a.clusterObj, corev1.EventTypeWarning, report.EventLockRecreated, "Init lock handed to its granted holder %s; %s was refused", d.Holder, a.m.Name)
	}
	return res, false, nil
}

// refuse makes the write of a refusal: the withdrawal of this call's grant,
// or the lock handed to the Machine the register names (a decision never
// asks for both). raced tells that the withdrawal lost a race: the register
// changed since it was read (a claim of this call applied late, say).
func (a *acquisition) refuse(ctx context.Context, cm *corev1.ConfigMap, obs Observation, d Decision) (raced bool, err error) {
	if d.Register == RegisterWithdraw {
		_, err := writeRegister(ctx, a.l.Client, a.cl, releasedGrant(a.token(), a.l.Clock.Now()))
		switch {
		case err == nil:
			// The register holds a value no claim of this call tests.
			a.claimUncertain = false
		case lostRace(err):
			return true, nil
		default:
			return false, fmt.Errorf("withdrawing the init-lock grant of machine %s from cluster %s/%s: %w", a.m.Name, a.cl.Namespace, a.cl.Name, err)
		}
	}
	if d.Action != ActionRecreate && d.Action != ActionYield {
		return false, nil
	}
	a.log.Info("The grant register names another machine, handing the lock to it", "holder", d.Holder)
	rec := Record{Ref: Ref{MachineName: d.Holder, ClusterUID: a.cl.UID}, HandedOverBy: a.m.Name}
	if obs.Granted != nil {
		rec.MachineUID = obs.Granted.UID
	}
	if d.Action == ActionRecreate {
		_, err = createLock(ctx, a.l.Client, a.cl, a.lockName, rec)
	} else {
		_, err = rewriteLock(ctx, a.l.Client, cm, a.cl, rec)
	}
	if err != nil && !lostRace(err) {
		return false, fmt.Errorf("lock %s/%s: handing it to machine %s: %w", a.cl.Namespace, a.lockName, d.Holder, err)
	}
	return false, nil
}

// token returns a fresh token and remembers it as this call's.
func (a *acquisition) token() string {
	t := a.l.Tokens()
	a.tokens = append(a.tokens, t)
	return t
}

func (a *acquisition) record(m Machine, token string) Record {
	at := a.l.Clock.Now().UTC().Truncate(time.Second)
	return Record{Ref: refTo(a.cl, m), Token: token, AcquiredAt: &at}
}

// noteLockWrite remembers a write of the lock, carrying out d with token,
// that may have been applied unseen.
func (a *acquisition) noteLockWrite(err error, d Decision, token string) {
	if err == nil || definite(err) {
		return
	}
	a.uncertain = true
	if token != "" {
		if a.lostWrites == nil {
			a.lostWrites = map[string]Decision{}
		}
		a.lostWrites[token] = d
	}
}

func (a *acquisition) registerError(err error) error {
	if apierrors.IsForbidden(err) {
		return fmt.Errorf("recording the init-lock grant of machine %s on cluster %s/%s: %w; the bootstrap provider needs \"get\" and \"patch\" on \"clusters.cluster.x-k8s.io\"", a.m.Name, a.cl.Namespace, a.cl.Name, err)
	}
	return fmt.Errorf("recording the init-lock grant of machine %s on cluster %s/%s: %w", a.m.Name, a.cl.Namespace, a.cl.Name, err)
}

func (a *acquisition) decisionError(obs Observation, d Decision) error {
	cl := a.cl
	switch {
	case isDamagedGrant(d.Err):
		return &report.Error{Namespace: cl.Namespace, Name: cl.Name, Kind: "cluster", Err: d.Err,
			Detail: "no machine can be granted the lock until it is repaired: once no machine of the cluster is running kubeadm init, run 'kubectl initlock release " + cl.Name + " -n " + cl.Namespace + " --force'"}
	case errors.Is(d.Err, report.ErrClusterGone):
		return &report.Error{Namespace: cl.Namespace, Name: cl.Name, Kind: "cluster", Err: d.Err,
			Detail: "a lock is only granted for an existing Cluster; nothing was changed"}
	case errors.Is(d.Err, report.ErrClusterPaused):
		return pausedError(cl)
	case errors.Is(d.Err, report.ErrStaleMachine):
		return staleMachineError(a.m, obs.CallerLive, "nothing was granted: call again with the live Machine")
	}
	return lockError(cl.Namespace, a.lockName, d.Err)
}

func (a *acquisition) acquired(action Action) {
	l, m := a.l, a.m
	switch action {
	case ActionCreate:
		l.event(a.clusterObj, corev1.EventTypeNormal, report.EventLockAcquired, "Machine %s acquired the init lock", m.Name)
	case ActionTakeOver:
		l.event(a.clusterObj, corev1.EventTypeNormal, report.EventLockTakenOver, "Machine %s took over the init lock", m.Name)
	case ActionAdopt:
		l.event(a.clusterObj, corev1.EventTypeNormal, report.EventLockAdopted, "Init lock re-adopted by cluster UID %s", a.cl.UID)
	}
	a.log.V(2).Info("Init lock acquired", "action", action)
}
