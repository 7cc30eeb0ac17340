package lock

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/initlock/initlock/pkg/initlock"

	"github.com/initlock/initlock/pkg/initlock/capi"
	"github.com/initlock/initlock/pkg/initlock/engine"
)

// EventSource is the name the controller reports its events under.
const EventSource = "initlock-manager"

// Event reasons of the manager's own; for what the library does too, the
// manager emits the library's (initlock.EventLockAdopted,
// initlock.EventLockReleased).
const (
	ReasonOrphanLockCollected = "OrphanLockCollected"
	ReasonCorruptLock         = "CorruptLock"
	ReasonForeignConfigMap    = "ForeignConfigMap"
	ReasonLockConflict        = "LockConflict"
	ReasonLockUnmarked        = "LockUnmarked"
)

const (
	// ForeignRecheck is how often a ConfigMap found not to be a lock is
	// looked at again, so that the gauge notices when it goes away (it is
	// not in the cache, so its deletion sends no event).
	ForeignRecheck = 5 * time.Minute
	// ConflictRetry is how soon a reconcile whose write met a conflict
	// runs again, should no event about the newer lock come first.
	ConflictRetry = time.Second
	// CacheLagRetry is how soon a reconcile waiting for the cache to show
	// its own last write runs again, should the watch event not come first.
	CacheLagRetry = 10 * time.Second
)

// Reconciler keeps the init lock of each Cluster owned, releases it after
// init and collects it when orphaned. Set the exported fields, then call
// SetupWithManager.
type Reconciler struct {
	// Client reads through the manager's cache and writes to the API server.
	Client client.Client
	// APIReader reads the API server directly, to confirm what the cache
	// cannot show.
	APIReader client.Reader
	// Recorder emits the events.
	Recorder initlock.EventRecorder
	// CAPIVersion is the Cluster API version served (v1beta2 or v1beta1).
	CAPIVersion string
	// Policy is passed to engine.Decide.
	Policy engine.Policy
	// Clock gives the time of decisions; nil is the real clock.
	Clock clock.PassiveClock
	// WatchFilter, when set, limits the adoption of locks to those of
	// Clusters labelled capi.WatchFilterLabel with this value (see inScope);
	// every lock is released and collected when that is safe.
	WatchFilter string

	mu     sync.Mutex
	memos  map[types.NamespacedName]*memo
	states stateTracker
}

var _ reconcile.Reconciler = (*Reconciler)(nil)

func (r *Reconciler) now() time.Time {
	if r.Clock == nil {
		return time.Now()
	}
	return r.Clock.Now()
}

// The manager reads and patches locks (adoption, the orphan's mark, the
// release mark), deletes them with preconditions, and never creates one.
// +kubebuilder:rbac:groups="",resources=configmaps,verbs=get;list;watch;patch;delete
// +kubebuilder:rbac:groups=cluster.x-k8s.io,resources=clusters,verbs=get;list;watch
// +kubebuilder:rbac:groups=cluster.x-k8s.io,resources=machines,verbs=get;list;watch
// +kubebuilder:rbac:groups=events.k8s.io,resources=events,verbs=create;patch

// Reconcile looks at the lock of the Cluster req names and makes at most one
// write to it. It decides from the cache; a decision that writes is
// confirmed against the API server first (engine.Confirm), so that no
// lock is adopted for, or released on behalf of, a Cluster that the cache
// still shows but that was deleted, created again or paused since.
func (r *Reconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	t, done, res, err := r.observe(ctx, req)
	if done || err != nil {
		return res, err
	}
	d := engine.Decide(t.obs, r.Policy, r.now())
	if d.Wait == engine.WaitPaused {
		ctrl.LoggerFrom(ctx).V(4).Info("Cluster is paused; leaving its lock alone")
		return ctrl.Result{}, nil
	}
	if t.cm == nil {
		// No lock in the cache: look for one the cache cannot show.
		if done, res, err := r.lookLive(ctx, &t); done || err != nil {
			return res, err
		}
		d = engine.Decide(t.obs, r.Policy, r.now())
	}
	log := ctrl.LoggerFrom(ctx).WithValues("lock", klog.KObj(t.cm), "verdict", d.Verdict, "action", d.Action)
	ctx = ctrl.LoggerInto(ctx, log)
	if !t.live && t.m.writtenFrom.shows(t.cm.UID, t.cm.ResourceVersion) {
		log.V(4).Info("Waiting for the cache to show the last write")
		return ctrl.Result{RequeueAfter: CacheLagRetry}, nil
	}
	r.states.set(req.NamespacedName, d.Verdict)
	if res, stop, err := r.report(ctx, t, d); stop || err != nil {
		return res, err
	}
	if d.Action == engine.ActionNone {
		log.V(4).Info("Nothing to write", "wait", d.Wait, "after", d.RequeueAfter)
		return ctrl.Result{RequeueAfter: d.RequeueAfter}, nil
	}
	return r.write(ctx, t, d)
}

// target is what one reconcile looks at: the Cluster's name, the lock's
// key, what was read and the memo of the Cluster.
type target struct {
	req     ctrl.Request
	lockKey types.NamespacedName
	query   engine.Query
	obs     engine.Observation
	cm      *corev1.ConfigMap
	// live tells that the lock was read from the API server, not the cache.
	live       bool
	m          *memo
	clusterObj *unstructured.Unstructured
}

// observe reads, from the cache, what the decision on req's lock needs.
// done is true when there is nothing to decide on.
func (r *Reconciler) observe(ctx context.Context, req ctrl.Request) (t target, done bool, res ctrl.Result, err error) {
	lockName, err := initlock.LockName(req.Name)
	if err != nil {
		// No valid ConfigMap can be this Cluster's lock.
		ctrl.LoggerFrom(ctx).V(4).Info("Cluster name cannot name a lock", "reason", err.Error())
		return t, true, ctrl.Result{}, nil
	}
	t = target{req: req, lockKey: types.NamespacedName{Namespace: req.Namespace, Name: lockName},
		query: engine.Query{Namespace: req.Namespace, ClusterName: req.Name, APIVersion: capi.Group + "/" + r.CAPIVersion}}
	if t.obs, t.cm, err = engine.Read(ctx, engine.From(r.Client), t.query); err != nil {
		return t, true, ctrl.Result{}, err
	}
	if t.obs.Cluster == nil && t.cm == nil {
		r.forget(req.NamespacedName)
		return t, true, ctrl.Result{}, nil
	}
	inScope, err := r.inScope(ctx, req.NamespacedName, t.obs.Cluster != nil, t.cm)
	if err != nil {
		return t, true, ctrl.Result{}, err
	}
	t.obs.OutOfScope = !inScope
	t.m = r.memoFor(req.NamespacedName)
	t.clusterObj = clusterObject(req.NamespacedName, r.CAPIVersion, t.obs.Cluster)
	r.noteAbsence(t.m, &t.obs)
	return t, false, ctrl.Result{}, nil
}

// lookLive looks for a ConfigMap with the lock's name that the cache does
// not show (unlabelled, or just created), once per Cluster UID and
// generation; a lock found is observed whole, live, so that it is
// adopted now, not at the next reconcile. done is true when there is
// none.
func (r *Reconciler) lookLive(ctx context.Context, t *target) (done bool, res ctrl.Result, err error) {
	if t.obs.OutOfScope || !r.needsLiveCheck(t.m, t.obs.Cluster) {
		r.states.set(t.req.NamespacedName, "")
		return true, ctrl.Result{}, nil
	}
	cm, err := r.getLockLive(ctx, t.lockKey)
	if err != nil {
		return true, ctrl.Result{}, err
	}
	if cm == nil {
		t.m.checked = checkKey(t.obs.Cluster)
		r.states.set(t.req.NamespacedName, "")
		return true, ctrl.Result{}, nil
	}
	t.cm, t.live = cm, true
	if t.obs.Lock = engine.ObserveLock(cm, t.req.Name); t.obs.Lock.Problem == nil {
		outOfScope := t.obs.OutOfScope
		if t.obs, t.cm, err = engine.Read(ctx, engine.From(r.APIReader), t.query); err != nil {
			return true, ctrl.Result{}, err
		}
		t.obs.OutOfScope = outOfScope
		if t.cm == nil {
			return true, ctrl.Result{RequeueAfter: ConflictRetry}, nil // gone meanwhile
		}
	}
	r.noteAbsence(t.m, &t.obs)
	return false, ctrl.Result{}, nil
}

// report tells people what only they can resolve (a ConfigMap in the
// lock's way, a corrupt lock, a conflict), once each.
// stop is true when the reconcile ends there.
func (r *Reconciler) report(ctx context.Context, t target, d engine.Decision) (res ctrl.Result, stop bool, err error) {
	log, m, cm := ctrl.LoggerFrom(ctx), t.m, t.cm
	switch {
	case errors.Is(d.Err, initlock.ErrNotALock):
		r.warn(m, t.clusterObj, cm, ReasonForeignConfigMap, d.Err)
		log.V(2).Info("ConfigMap is not a lock; leaving it alone", "reason", d.Err.Error())
		if t.live {
			return ctrl.Result{RequeueAfter: ForeignRecheck}, true, nil
		}
		return ctrl.Result{}, true, nil
	case errors.Is(d.Err, initlock.ErrCorruptLock):
		r.warn(m, t.clusterObj, cm, ReasonCorruptLock, d.Err)
		log.V(2).Info("Lock is corrupt; leaving it for a human", "reason", d.Err.Error())
		return ctrl.Result{}, true, nil
	case errors.Is(d.Err, initlock.ErrClusterPaused):
		return ctrl.Result{}, true, nil
	case d.Err != nil:
		return ctrl.Result{}, true, fmt.Errorf("deciding on lock %s: %w", t.lockKey, d.Err)
	}
	if d.Verdict == engine.VerdictConflict {
		// Only a person can resolve it: say so once per pair of Machines.
		lk, g := t.obs.Lock.Record.MachineName, t.obs.Cluster.Grant.MachineName
		if m.conflict != lk+"/"+g {
			m.conflict = lk + "/" + g
			r.warn(m, t.clusterObj, cm, ReasonLockConflict, fmt.Errorf("the lock names machine %s, the Cluster's grant register machine %s", lk, g))
		}
	} else {
		m.conflict = ""
		m.warned = ""
	}
	return ctrl.Result{}, false, nil
}

// write confirms decision d against the API server and makes its one
// conditional write.
func (r *Reconciler) write(ctx context.Context, t target, d engine.Decision) (ctrl.Result, error) {
	log := ctrl.LoggerFrom(ctx)
	now := r.now()
	obs, d, err := engine.Keep(ctx, r.APIReader, r.Client, t.cm, t.obs, d, r.Policy, now)
	if err != nil {
		switch {
		case errors.Is(err, engine.ErrNotConfirmed) && d.Action == engine.ActionNone:
			log.V(2).Info("The API server does not confirm the decision; nothing to do", "verdict", d.Verdict)
			return ctrl.Result{RequeueAfter: d.RequeueAfter}, nil
		case errors.Is(err, engine.ErrNotConfirmed):
			// The cache is behind the API server: decide again once it
			// has caught up (the change that made the difference sends
			// an event).
			log.V(2).Info("The API server does not confirm the decision; waiting for the cache", "confirmed", d.Action)
			return ctrl.Result{RequeueAfter: CacheLagRetry}, nil
		case apierrors.IsConflict(err):
			log.V(2).Info("Lock changed since it was read; looking again")
			return ctrl.Result{RequeueAfter: ConflictRetry}, nil
		case apierrors.IsNotFound(err):
			log.V(2).Info("Lock is gone already")
			return ctrl.Result{}, nil
		}
		return ctrl.Result{}, fmt.Errorf("%s lock %s: %w", d.Action, t.lockKey, err)
	}
	t.m.writtenFrom = objectVersion{t.cm.UID, t.cm.ResourceVersion}
	if d.Action == engine.ActionRelease || d.Action == engine.ActionCollect {
		t.m.writtenFrom.resourceVersion = anyVersion
	}
	log.Info("Lock written", "holder", d.Holder)
	r.record(t.clusterObj, t.cm, obs, d, now)
	return ctrl.Result{RequeueAfter: d.RequeueAfter}, nil
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
func (r *Reconciler) getLockLive(ctx context.Context, key types.NamespacedName) (*corev1.ConfigMap, error) {
	cm := &corev1.ConfigMap{}
	if err := r.APIReader.Get(ctx, key, cm); err != nil {
		if apierrors.IsNotFound(err) {
			return nil, nil
		}
		return nil, fmt.Errorf("reading configmap %s: %w", key, err)
	}
	return cm, nil
}
