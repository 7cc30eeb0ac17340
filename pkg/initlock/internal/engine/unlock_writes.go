package engine

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"

	"github.com/initlock/initlock/pkg/initlock/internal/report"
)

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
