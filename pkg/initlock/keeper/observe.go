package keeper

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/initlock/initlock/pkg/initlock"
	"github.com/initlock/initlock/pkg/initlock/capi"
	"github.com/initlock/initlock/pkg/initlock/internal/engine"
)

// target is what one Keep looks at: the Cluster's key, the lock's key, what
// was read and the memo of the Cluster.
type target struct {
	key     types.NamespacedName
	lockKey types.NamespacedName
	query   Query
	read    engine.Query
	obs     engine.Observation
	cm      *corev1.ConfigMap
	// live tells that the lock was read from the API server, not the cache.
	live       bool
	m          *memo
	clusterObj *unstructured.Unstructured
}

// observe reads, through Client, what the decision on key's lock needs.
// done is true when there is nothing to decide on.
func (k *Keeper) observe(ctx context.Context, key types.NamespacedName) (t target, s Status, done bool, err error) {
	lockName, err := initlock.LockName(key.Name)
	if err != nil {
		// No valid ConfigMap can be this Cluster's lock.
		ctrl.LoggerFrom(ctx).V(4).Info("Cluster name cannot name a lock", "reason", err.Error())
		return t, Status{}, true, nil
	}
	t = target{key: key, lockKey: types.NamespacedName{Namespace: key.Namespace, Name: lockName},
		query: Query{Namespace: key.Namespace, Cluster: key.Name, CAPIVersion: k.CAPIVersion, Policy: k.Policy, Now: k.now()},
		read:  engine.Query{Namespace: key.Namespace, ClusterName: key.Name, APIVersion: capi.Group + "/" + k.CAPIVersion}}
	if t.obs, t.cm, err = engine.Read(ctx, engine.From(k.Client), t.read); err != nil {
		return t, Status{}, true, err
	}
	if t.obs.Cluster == nil && t.cm == nil {
		k.forget(key)
		return t, Status{Query: t.query, LockName: lockName, Verdict: string(engine.VerdictFree)}, true, nil
	}
	inScope, err := k.inScope(ctx, key, t.obs.Cluster != nil, t.cm)
	if err != nil {
		return t, Status{}, true, err
	}
	t.obs.OutOfScope = !inScope
	t.m = k.memoFor(key)
	t.clusterObj = clusterObject(key, k.CAPIVersion, t.obs.Cluster)
	k.noteAbsence(t.m, &t.obs)
	return t, Status{}, false, nil
}

// lookLive looks for a ConfigMap with the lock's name that the cache does
// not show (unlabelled, or just created), once per Cluster UID and
// generation; a lock found is observed whole, live, so that it is
// adopted now, not at the next Keep. done is true when there is none: s
// is then decision d's Status.
func (k *Keeper) lookLive(ctx context.Context, t *target, d engine.Decision) (s Status, done bool, err error) {
	if t.obs.OutOfScope || !t.m.needsLiveCheck(t.obs.Cluster) {
		return describe(t.query, nil, t.obs, d, false), true, nil
	}
	cm, err := k.getLockLive(ctx, t.lockKey)
	if err != nil {
		return Status{}, true, err
	}
	if cm == nil {
		t.m.checked = checkKey(t.obs.Cluster)
		return describe(t.query, nil, t.obs, d, false), true, nil
	}
	t.cm, t.live = cm, true
	if t.obs.Lock = engine.ObserveLock(cm, t.key.Name); t.obs.Lock.Problem == nil {
		outOfScope := t.obs.OutOfScope
		if t.obs, t.cm, err = engine.Read(ctx, engine.From(k.APIReader), t.read); err != nil {
			return Status{}, true, err
		}
		t.obs.OutOfScope = outOfScope
		if t.cm == nil {
			return Status{RequeueAfter: conflictRetry}, true, nil // gone meanwhile
		}
	}
	k.noteAbsence(t.m, &t.obs)
	return Status{}, false, nil
}

// inScope tells whether the lock of a Cluster is the Keeper's to adopt
// under its watch filter (engine.Observation.OutOfScope): the Cluster must
// carry the filter label; a lock whose Cluster does not exist (an orphan)
// must carry it itself, since nothing else tells which keeper it belongs
// to. The filter decides what the Keeper takes care of, never what it
// lets go: a lock out of scope is still released and collected when that
// is safe. Without a filter every lock is in scope, and nothing is read.
func (k *Keeper) inScope(ctx context.Context, key types.NamespacedName, clusterExists bool, lock *corev1.ConfigMap) (bool, error) {
	if k.WatchFilter == "" {
		return true, nil
	}
	if clusterExists {
		cluster := &unstructured.Unstructured{}
		cluster.SetGroupVersionKind(capi.ClusterGVK(k.CAPIVersion))
		if err := k.Client.Get(ctx, key, cluster); err != nil {
			return false, client.IgnoreNotFound(fmt.Errorf("reading Cluster %s for the watch filter: %w", key, err))
		}
		return cluster.GetLabels()[capi.WatchFilterLabel] == k.WatchFilter, nil
	}
	return lock != nil && lock.Labels[capi.WatchFilterLabel] == k.WatchFilter, nil
}

// clusterObject is the Cluster events are recorded on; nil when it does
// not exist.
func clusterObject(key types.NamespacedName, version string, cl *engine.Cluster) *unstructured.Unstructured {
	if cl == nil {
		return nil
	}
	u := &unstructured.Unstructured{}
	u.SetGroupVersionKind(capi.ClusterGVK(version))
	u.SetNamespace(key.Namespace)
	u.SetName(key.Name)
	u.SetUID(cl.UID)
	u.SetResourceVersion(cl.ResourceVersion)
	return u
}

// getLockLive reads the ConfigMap with the lock's name from the API server.
func (k *Keeper) getLockLive(ctx context.Context, key types.NamespacedName) (*corev1.ConfigMap, error) {
	cm := &corev1.ConfigMap{}
	if err := k.APIReader.Get(ctx, key, cm); err != nil {
		if apierrors.IsNotFound(err) {
			return nil, nil
		}
		return nil, fmt.Errorf("reading configmap %s: %w", key, err)
	}
	return cm, nil
}
