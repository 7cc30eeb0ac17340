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
	"k8s.io/apimachinery/pkg/runtime"
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

// Event reasons.
const (
	ReasonLockAdopted         = "LockAdopted"
	ReasonLockReleased        = "LockReleased"
	ReasonOrphanLockCollected = "OrphanLockCollected"
	ReasonCorruptLock         = "CorruptLock"
	ReasonForeignConfigMap    = "ForeignConfigMap"
	ReasonLockConflict        = "LockConflict"
	ReasonLockProtected       = "LockProtected"
	ReasonLockUnprotected     = "LockUnprotected"
	ReasonLockDeleteHeldBack  = "LockDeleteHeldBack"
	ReasonLockDisarmed        = "LockDisarmed"
	ReasonLockRearmed         = "LockRearmed"
)

const (
	// foreignRecheck is how often a ConfigMap found not to be a lock is
	// looked at again, so that the gauge notices when it goes away (it is
	// not in the cache, so its deletion sends no event).
	foreignRecheck = 5 * time.Minute
	// conflictRetry is how soon a reconcile whose write met a conflict
	// runs again, should no event about the newer lock come first.
	conflictRetry = time.Second
	// cacheLagRetry is how soon a reconcile waiting for the cache to show
	// its own last write runs again, should the watch event not come first.
	cacheLagRetry = 10 * time.Second
)

// EventRecorder is the part of the events.k8s.io recorder
// (k8s.io/client-go/tools/events) the controller uses.
type EventRecorder interface {
	Eventf(regarding, related runtime.Object, eventtype, reason, action, note string, args ...any)
}

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
	Recorder EventRecorder
	// CAPIVersion is the Cluster API version served (v1beta2 or v1beta1).
	CAPIVersion string
	// Policy is passed to engine.Decide.
	Policy engine.Policy
	// Clock gives the time of decisions; nil is the real clock.
	Clock clock.PassiveClock
	// WatchFilter, when set, limits the reconciler to the locks of Clusters
	// labelled capi.WatchFilterLabel with this value (see inScope).
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

// The manager reads and patches locks, deletes them with preconditions, and
// never creates one.
// +kubebuilder:rbac:groups="",resources=configmaps,verbs=get;list;watch;patch;delete
// +kubebuilder:rbac:groups=cluster.x-k8s.io,resources=clusters,verbs=get;list;watch
// +kubebuilder:rbac:groups=cluster.x-k8s.io,resources=machines,verbs=get;list;watch
// +kubebuilder:rbac:groups=events.k8s.io,resources=events,verbs=create;patch
// A held lock being deleted is disarmed when its holder's bootstrap
// configuration reports a failed generation of the init data.
// +kubebuilder:rbac:groups=bootstrap.cluster.x-k8s.io,resources=kubeadmconfigs,verbs=get

// Reconcile looks at the lock of the Cluster req names and makes at most one
// write to it. It decides from the cache; a decision that writes is
// confirmed against the API server first (engine.Confirm), so that no
// lock is adopted for, or released on behalf of, a Cluster that the cache
// still shows but that was deleted, created again or paused since.
func (r *Reconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	log := ctrl.LoggerFrom(ctx)
	lockName, err := initlock.LockName(req.Name)
	if err != nil {
		// No valid ConfigMap can be this Cluster's lock.
		log.V(4).Info("Cluster name cannot name a lock", "reason", err.Error())
		return ctrl.Result{}, nil
	}
	lockKey := types.NamespacedName{Namespace: req.Namespace, Name: lockName}
	src := engine.From(r.Client)
	src.Bootstrap = r.APIReader
	query := engine.Query{Namespace: req.Namespace, ClusterName: req.Name, APIVersion: capi.Group + "/" + r.CAPIVersion}
	obs, cm, err := engine.Read(ctx, src, query)
	if err != nil {
		return ctrl.Result{}, err
	}
	inScope, err := r.inScope(ctx, req.NamespacedName, obs.Cluster != nil, cm)
	if err != nil {
		return ctrl.Result{}, err
	}
	if (obs.Cluster == nil && cm == nil) || !inScope {
		r.forget(req.NamespacedName)
		return ctrl.Result{}, nil
	}
	m := r.memoFor(req.NamespacedName)
	clusterObj := clusterObject(req.NamespacedName, r.CAPIVersion, obs.Cluster)

	r.noteAbsence(m, &obs)
	d := engine.Decide(obs, r.Policy, r.now())
	if d.Wait == engine.WaitPaused {
		log.V(4).Info("Cluster is paused; leaving its lock alone")
		return ctrl.Result{}, nil
	}

	live := false
	if cm == nil {
		if !r.needsLiveCheck(m, obs.Cluster) {
			r.states.set(req.NamespacedName, "")
			return ctrl.Result{}, nil
		}
		if cm, err = r.getLockLive(ctx, lockKey); err != nil {
			return ctrl.Result{}, err
		}
		if cm == nil {
			m.checked = checkKey(obs.Cluster)
			r.states.set(req.NamespacedName, "")
			return ctrl.Result{}, nil
		}
		if obs.Lock = engine.ObserveLock(cm, req.Name); obs.Lock.Problem == nil {
			// A lock the cache does not show yet (just created): observe it
			// whole, live, so that it is protected now, not at the next
			// reconcile.
			liveSrc := engine.From(r.APIReader)
			liveSrc.Bootstrap = r.APIReader
			if obs, cm, err = engine.Read(ctx, liveSrc, query); err != nil {
				return ctrl.Result{}, err
			}
			if cm == nil {
				return ctrl.Result{RequeueAfter: conflictRetry}, nil // gone meanwhile
			}
		}
		live = true
		r.noteAbsence(m, &obs)
		d = engine.Decide(obs, r.Policy, r.now())
	}
	if !live && m.writtenFrom == (objectVersion{cm.UID, cm.ResourceVersion}) {
		log.V(4).Info("Waiting for the cache to show the last write", "lock", klog.KObj(cm))
		return ctrl.Result{RequeueAfter: cacheLagRetry}, nil
	}

	r.states.set(req.NamespacedName, d.Verdict)
	log = log.WithValues("lock", klog.KObj(cm), "verdict", d.Verdict, "action", d.Action)

	switch {
	case errors.Is(d.Err, initlock.ErrNotALock):
		r.warn(m, clusterObj, cm, ReasonForeignConfigMap, d.Err)
		log.V(2).Info("ConfigMap is not a lock; leaving it alone", "reason", d.Err.Error())
		if live {
			return ctrl.Result{RequeueAfter: foreignRecheck}, nil
		}
		return ctrl.Result{}, nil
	case errors.Is(d.Err, initlock.ErrCorruptLock):
		r.warn(m, clusterObj, cm, ReasonCorruptLock, d.Err)
		log.V(2).Info("Lock is corrupt; leaving it for a human", "reason", d.Err.Error())
		return ctrl.Result{}, nil
	case errors.Is(d.Err, initlock.ErrClusterPaused):
		return ctrl.Result{}, nil
	case d.Err != nil:
		return ctrl.Result{}, fmt.Errorf("deciding on lock %s: %w", lockKey, d.Err)
	}
	if d.Verdict == engine.VerdictConflict {
		// Only a person can resolve it: say so once per pair of Machines.
		pair := obs.Lock.Record.MachineName + "/" + obs.Cluster.Grant.MachineName
		if m.conflict != pair {
			m.conflict = pair
			r.warn(m, clusterObj, cm, ReasonLockConflict, fmt.Errorf("the lock names machine %s, the Cluster's grant register machine %s",
				obs.Lock.Record.MachineName, obs.Cluster.Grant.MachineName))
		}
	} else {
		m.conflict = ""
		m.warned = ""
	}

	if d.Wait == engine.WaitSettle {
		log.V(4).Info("Lock's Cluster is absent; waiting before recording it", "after", d.RequeueAfter)
		return ctrl.Result{RequeueAfter: d.RequeueAfter}, nil
	}
	if d.Wait == engine.WaitHeld && m.heldBack != cm.UID {
		// Once per lock: its delete is held back by the finalizer.
		m.heldBack = cm.UID
		deletesHeldTotal.Inc()
		regarding, related := about(clusterObj, cm)
		r.event(regarding, related, corev1.EventTypeWarning, ReasonLockDeleteHeldBack, "Protect",
			"Init lock %s is being deleted, but its holder Machine %s exists and the control plane is not initialised: finalizer %s keeps it until the holder is done "+
				"(initialised, gone, or its bootstrap failed); to let it go now, once no Machine runs kubeadm init: kubectl initlock release %s -n %s --force",
			cm.Name, d.Holder, engine.HeldFinalizer, req.Name, req.Namespace)
	}
	if d.Action == engine.ActionNone {
		return ctrl.Result{RequeueAfter: d.RequeueAfter}, nil
	}

	now := r.now()
	action := d.Action
	if obs, d, err = engine.Confirm(ctx, r.APIReader, obs, d, r.Policy, now); err != nil {
		return ctrl.Result{}, err
	}
	switch {
	case d.Action == engine.ActionNone:
		log.V(2).Info("The API server does not confirm the decision; nothing to do", "verdict", d.Verdict)
		return ctrl.Result{RequeueAfter: d.RequeueAfter}, nil
	case d.Action != action:
		// The cache is behind the API server: decide again once it has
		// caught up (the change that made the difference sends an event).
		log.V(2).Info("The API server does not confirm the decision; waiting for the cache", "confirmed", d.Action)
		return ctrl.Result{RequeueAfter: cacheLagRetry}, nil
	}
	if err := engine.Apply(ctx, r.Client, cm, obs, d, now); err != nil {
		switch {
		case apierrors.IsConflict(err):
			log.V(2).Info("Lock changed since it was read; looking again")
			return ctrl.Result{RequeueAfter: conflictRetry}, nil
		case apierrors.IsNotFound(err):
			log.V(2).Info("Lock is gone already")
			return ctrl.Result{}, nil
		}
		return ctrl.Result{}, fmt.Errorf("%s lock %s: %w", d.Action, lockKey, err)
	}
	m.writtenFrom = objectVersion{cm.UID, cm.ResourceVersion}
	log.Info("Lock written", "holder", d.Holder)
	r.record(clusterObj, cm, obs, d, now)
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
