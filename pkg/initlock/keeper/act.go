package keeper

import (
	"context"
	"errors"
	"fmt"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/klog/v2"
	ctrl "sigs.k8s.io/controller-runtime"

	"github.com/initlock/initlock/pkg/initlock"
	"github.com/initlock/initlock/pkg/initlock/internal/engine"
	"github.com/initlock/initlock/pkg/initlock/internal/report"
)

// act reports decision d, taken on t, and makes its write.
func (k *Keeper) act(ctx context.Context, t target, d engine.Decision) (Status, error) {
	log := ctrl.LoggerFrom(ctx).WithValues("lock", klog.KObj(t.cm), "verdict", d.Verdict, "action", d.Action)
	ctx = ctrl.LoggerInto(ctx, log)
	if !t.live && t.m.writtenFrom.shows(t.cm.UID, t.cm.ResourceVersion) {
		log.V(4).Info("Waiting for the cache to show the last write")
		return Status{RequeueAfter: cacheLagRetry}, nil
	}
	rep := describe(t.query, t.cm, t.obs, d, false)
	rep.RequeueAfter = 0
	if stop, err := k.warnings(ctx, t, d, &rep); stop || err != nil {
		return rep, err
	}
	if d.Action == engine.ActionNone {
		log.V(4).Info("Nothing to write", "wait", d.Wait, "after", d.RequeueAfter)
		rep.RequeueAfter = d.RequeueAfter
		return rep, nil
	}
	return k.write(ctx, t, d, rep)
}

// warnings tells people what only they can resolve (a ConfigMap in the
// lock's way, a corrupt lock, a conflict), once each. stop is true when
// Keep ends there.
func (k *Keeper) warnings(ctx context.Context, t target, d engine.Decision, rep *Status) (stop bool, err error) {
	log, m, cm := ctrl.LoggerFrom(ctx), t.m, t.cm
	switch {
	case engine.OtherProvidersLock(d.Err):
		// Another provider's lock of the same name (KubeKey's): its own
		// provider takes and releases it, as the lock guard leaves it.
		log.V(2).Info("ConfigMap is another provider's lock; leaving it alone", "reason", d.Err.Error())
		return true, nil
	case errors.Is(d.Err, initlock.ErrNotALock):
		rep.Warning = k.warn(m, t.clusterObj, cm, report.EventForeignConfigMap, d.Err)
		log.V(2).Info("ConfigMap is not a lock; leaving it alone", "reason", d.Err.Error())
		if t.live {
			rep.RequeueAfter = foreignRecheck
		}
		return true, nil
	case errors.Is(d.Err, initlock.ErrCorruptLock):
		rep.Warning = k.warn(m, t.clusterObj, cm, report.EventCorruptLock, d.Err)
		log.V(2).Info("Lock is corrupt; leaving it for a human", "reason", d.Err.Error())
		return true, nil
	case errors.Is(d.Err, initlock.ErrClusterPaused):
		return true, nil
	case d.Err != nil:
		return true, fmt.Errorf("deciding on lock %s: %w", t.lockKey, d.Err)
	}
	if d.Verdict == engine.VerdictConflict {
		// Only a person can resolve it: say so once per pair of Machines.
		lk, g := t.obs.Lock.Record.MachineName, t.obs.Cluster.Grant.MachineName
		if m.conflict != lk+"/"+g {
			m.conflict = lk + "/" + g
			rep.Warning = k.warn(m, t.clusterObj, cm, report.EventLockConflict, fmt.Errorf("the lock names machine %s, the Cluster's grant register machine %s", lk, g))
		}
	} else {
		m.conflict = ""
		m.warned = ""
	}
	return false, nil
}

// write confirms decision d against the API server and makes its one
// conditional write.
func (k *Keeper) write(ctx context.Context, t target, d engine.Decision, rep Status) (Status, error) {
	log := ctrl.LoggerFrom(ctx)
	now := k.now()
	obs, d, err := engine.Keep(ctx, k.APIReader, k.Client, t.cm, t.obs, d, k.Policy.engine(), now)
	if err != nil {
		switch {
		case errors.Is(err, engine.ErrNotConfirmed) && d.Action == engine.ActionNone:
			log.V(2).Info("The API server does not confirm the decision; nothing to do", "verdict", d.Verdict)
			return describe(t.query, t.cm, obs, d, false), nil
		case errors.Is(err, engine.ErrNotConfirmed):
			// The cache is behind the API server: decide again once it
			// has caught up (the change that made the difference sends
			// an event).
			log.V(2).Info("The API server does not confirm the decision; waiting for the cache", "confirmed", d.Action)
			rep.RequeueAfter = cacheLagRetry
			return rep, nil
		case apierrors.IsConflict(err):
			log.V(2).Info("Lock changed since it was read; looking again")
			rep.RequeueAfter = conflictRetry
			return rep, nil
		case apierrors.IsNotFound(err):
			log.V(2).Info("Lock is gone already")
			return rep, nil
		}
		return rep, fmt.Errorf("%s lock %s: %w", d.Action, t.lockKey, err)
	}
	t.m.writtenFrom = objectVersion{t.cm.UID, t.cm.ResourceVersion}
	if d.Action == engine.ActionRelease || d.Action == engine.ActionCollect {
		t.m.writtenFrom.resourceVersion = anyVersion
	}
	log.Info("Lock written", "holder", d.Holder)
	rep = describe(t.query, t.cm, obs, d, false)
	rep.Written = true
	k.record(t.clusterObj, t.cm, obs, d, now, &rep)
	return rep, nil
}
