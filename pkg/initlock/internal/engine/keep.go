package engine

import (
	"context"
	"errors"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// Keep is the one way a keeper (the manager, kubectl initlock repair)
// writes a lock: it confirms decision d, taken on o as observed from lock
// cm, against the API server (Confirm), and applies the confirmed decision
// (Apply) when its action is d's. A release or a collection confirms it
// once more between its mark and its delete (the Cluster and the Machines
// read live again, after the mark, releaseChecked): a restore that brought
// the holder back since the first reading stops it, and so does a reading
// or a delete that fails; the release then takes its own mark off again
// (takeMarkOff, read again and retried while it fails), unless the Cluster
// read again is paused or initialised (the mark is taken off once it is
// unpaused). A mark whose answer was lost is read again live and, found,
// followed through the same way (markLockLive). Only a mark the API server
// fails every try at taking off (maxAttempts, back to back), one whose
// timed-out request the server applied after the release read the lock
// again, or one on a Cluster paused or initialised since, is left to the
// keepers, which take it off once ReleaseMarkGrace
// has passed and the Cluster is not paused; until then the lock guard lets
// a delete of that lock through. It returns the observation and the
// decision as confirmed, and ErrNotConfirmed when the action differs (the
// confirmed decision says what it is now), or the writes' error.
func Keep(ctx context.Context, live client.Reader, c client.Writer, cm *corev1.ConfigMap, o Observation, d Decision, p Policy, now time.Time) (Observation, Decision, error) {
	obs, confirmed, err := Confirm(ctx, live, o, d, p, now)
	switch {
	case err != nil:
		return o, d, fmt.Errorf("confirming %s of lock %s/%s live: %w", d.Action, cm.Namespace, cm.Name, err)
	case confirmed.Action != d.Action:
		return obs, confirmed, ErrNotConfirmed
	case d.Action != ActionRelease && d.Action != ActionCollect || obs.Lock == nil || obs.Lock.Problem != nil:
		return obs, confirmed, Apply(ctx, c, cm, obs, confirmed, now)
	}
	// Its holder, or a grant's Machine, back stops the release, which
	// takes its mark off, unless the Cluster is now paused or initialised
	// (nothing is written then); a reading that fails stops it too.
	last := confirmed
	err = releaseChecked(ctx, live, c, cm, now, func(marked *corev1.ConfigMap) (bool, error) {
		again := obs
		again.Lock = ObserveLock(marked, o.ClusterName)
		seen, d2, err := Confirm(ctx, live, again, confirmed, p, now)
		switch {
		case err != nil:
			return true, fmt.Errorf("confirming %s of lock %s/%s live once marked: %w", d.Action, cm.Namespace, cm.Name, err)
		case d2.Action == confirmed.Action:
			return false, nil
		}
		last = d2
		return marksLeft(seen), ErrNotConfirmed
	})
	return obs, last, err
}

// ErrNotConfirmed means Keep's live read does not confirm a keeper's
// decision: the API server's Cluster or Machines decide another action
// than the one taken on the cache or on an older read. Nothing was
// written; observe the lock again.
var ErrNotConfirmed = errors.New("decision not confirmed by the API server")

// Confirm checks a keeper's decision against the API server before it is
// applied: a decision taken from a cache may rest on a Cluster that has
// been deleted, created again under its name, paused or unpaused since.
// For a decision that writes, it reads the Cluster live and, before a
// release or a collection, then the Machines the lock and the grant
// register name, and decides again on what it read, with the lock as
// observed (its write's preconditions cover it). It
// returns the observation and decision to apply; a decision that writes
// nothing is returned as it is, without reading.
func Confirm(ctx context.Context, live client.Reader, o Observation, d Decision, p Policy, now time.Time) (Observation, Decision, error) {
	if d.Action == ActionNone || o.Lock == nil || o.Lock.Problem != nil {
		return o, d, nil
	}
	// The version the observation was read in, which the server serves;
	// never a default (a v1beta1-only server serves no v1beta2).
	gv := o.APIVersion
	if o.Cluster != nil {
		gv = o.Cluster.APIVersion
	}
	cl, err := getCluster(ctx, live, gv, o.Lock.Namespace, o.ClusterName)
	if err != nil {
		return o, d, err
	}
	o.Cluster = cl
	if cl != nil && cl.Initialized {
		o.Granted = nil
	}
	if d.Action == ActionRelease || d.Action == ActionCollect {
		// Letting a lock go rests on who its holder and the register's
		// grantee are: read them live, after the Cluster.
		granted := ""
		if g := grantThatCounts(cl); g.Held() {
			granted = g.MachineName
		}
		found, err := getMachines(ctx, live, gv, o.Lock.Namespace, nil, nil, o.Lock.Record.MachineName, granted)
		if err != nil {
			return o, d, err
		}
		o.Holder, o.Granted = found[o.Lock.Record.MachineName], found[granted]
	}
	return o, Decide(o, p, now), nil
}

// Apply carries out a keeper's decision (the manager's or the CLI's) on the
// lock cm that o was observed from: ActionAdopt, ActionMarkOrphan or
// ActionUnmark, one patch conditional on the resourceVersion read, or ActionRelease or
// ActionCollect, the release mark conditional on the resourceVersion read
// and then the delete conditional on the UID and the resourceVersion the
// mark left. ActionNone writes nothing. A conflict comes back as the
// API's Conflict error: the lock changed, observe it again.
//
// Apply refuses to write to a ConfigMap that is not a usable lock, whatever
// the decision says. The lock's preconditions bind the write to the lock
// read, not to the Cluster: a decision made from a cache goes through
// Confirm first.
func Apply(ctx context.Context, c client.Writer, cm *corev1.ConfigMap, o Observation, d Decision, now time.Time) error {
	if d.Action == ActionNone {
		return nil
	}
	if cm == nil || o.Lock == nil {
		return fmt.Errorf("applying %s: no lock observed", d.Action)
	}
	if o.Lock.Problem != nil {
		return lockError(cm.Namespace, cm.Name, o.Lock.Problem)
	}
	switch d.Action {
	case ActionAdopt:
		if o.Cluster == nil {
			return fmt.Errorf("adopting lock %s/%s: its cluster does not exist", cm.Namespace, cm.Name)
		}
		_, err := adoptLock(ctx, c, cm, *o.Cluster)
		return err
	case ActionRelease, ActionCollect:
		return releaseLock(ctx, c, cm, now)
	case ActionMarkOrphan:
		next := cm.DeepCopy()
		if next.Annotations == nil {
			next.Annotations = map[string]string{}
		}
		next.Annotations[ClusterAbsentAnnotation] = absentMark(absentFrom(o, now), cm.UID)
		if d.Unmark {
			dropMarks(next)
		}
		return c.Patch(ctx, next, client.MergeFromWithOptions(cm, client.MergeFromWithOptimisticLock{}))
	case ActionUnmark:
		return unmarkLock(ctx, c, cm)
	}
	return fmt.Errorf("applying %s to lock %s/%s: not a keeper action", d.Action, cm.Namespace, cm.Name)
}
