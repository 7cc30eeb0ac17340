package keeper

import (
	"context"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/initlock/initlock/pkg/initlock/capi"
	"github.com/initlock/initlock/pkg/initlock/internal/engine"
)

// Query names the Cluster whose lock Inspect looks at, and what to decide
// about it.
type Query struct {
	Namespace, Cluster string
	// CAPIVersion is the Cluster API version to read Clusters and
	// Machines in (capi.V1Beta2 or capi.V1Beta1; see capi.Discover).
	CAPIVersion string
	// Policy and Now are what a keeper's decision is taken with.
	Policy Policy
	Now    time.Time
	// Release decides an operator's release of the lock (kubectl initlock
	// release) instead of what a keeper does with it; Force is the
	// release's --force: without it, a release that may let a second
	// Machine run kubeadm init is refused (Status.Err wraps
	// initlock.ErrNotHolder, Status.NeedsForce).
	Release, Force bool
}

// Status is one Cluster's init lock as read, and the decision on it: what
// a keeper does (Query.Release false) or what an operator's release does.
// Inspect, Apply and Keeper.Keep return it.
type Status struct {
	// Query is what the lock was read and decided for.
	Query Query
	// LockName is the lock's ConfigMap name, "<cluster>-lock".
	LockName string
	// ConfigMap is the ConfigMap with the lock's name, nil when there is
	// none.
	ConfigMap *corev1.ConfigMap

	// LockExists tells that ConfigMap is there; LockProblem, when set,
	// wraps initlock.ErrNotALock or initlock.ErrCorruptLock: it is not a
	// lock, or one that cannot be read.
	LockExists  bool
	LockProblem error
	// LockUID and LockResourceVersion are the ConfigMap's.
	LockUID             types.UID
	LockResourceVersion string
	// RecordHolder is the Machine the lock's record names.
	RecordHolder string
	// Created is when the ConfigMap was created; ClusterAbsentSince when
	// a keeper first saw the lock without its Cluster, as marked on it.
	Created            time.Time
	ClusterAbsentSince *time.Time
	// Protection is how the lock stands against a delete: "guarded" (no
	// mark lets a delete through: the lock guard, the admission policy
	// initlock-lock-guard, refuses every delete but a release's while it
	// is in force, which Inspect does not read; kubectl initlock shows the
	// lock unguarded when it is not), "releasable" (a release marked it), "moving"
	// (clusterctl move's delete-for-move mark, with or without a release
	// mark) or "deleting" (held back by another controller's finalizer);
	// empty with LockProblem.
	Protection string

	// ClusterExists, ClusterInitialized and ClusterPaused describe the
	// Cluster; ClusterUID is its UID.
	ClusterExists, ClusterInitialized, ClusterPaused bool
	ClusterUID                                       types.UID
	// Grant is the Cluster's grant register as written (the annotation's
	// value, "" when absent); GrantHolder the Machine it grants the lock
	// to, "" when it grants none or cannot be read.
	Grant, GrantHolder string
	// HolderExists tells that a Machine of the name the lock names exists
	// (it may be another Machine created under that name: Verdict says
	// whether it holds the lock), or, when there is no lock, the Machine
	// the grant names.
	HolderExists bool

	// Verdict is the health of the lock: "healthy", "unowned",
	// "held-after-init", "stale-holder", "orphan", "conflict", "corrupt",
	// "foreign", "lost" or "free".
	Verdict string
	// Owner is the state of the lock's Cluster ownerReference: "ok",
	// "missing", "stale-uid" or "wrong-cluster"; empty when not judged.
	Owner string
	// Action is the write to the lock: "none", "adopt", "unmark",
	// "release", "mark-orphan" or "collect"; Writes tells that the
	// decision writes the lock or the grant register.
	Action string
	Writes bool
	// Holder is the Machine that holds the lock after the decision's
	// writes; Reason is a release's reason ("initialized",
	// "cluster-deleting", "holder-gone", "unlock").
	Holder, Reason string
	// Wait says why nothing is done for now ("" when something is, or
	// nothing needs to be); "person" when only a person can resolve it.
	Wait string
	// RequeueAfter is when to look again, for waits with a deadline.
	RequeueAfter time.Duration
	// Err is why the lock cannot be used or touched, when it cannot.
	Err error
	// NeedsForce tells that the release may let a second Machine run
	// kubeadm init: ForceReason names the Machine that exists, empty when
	// it is unknown. ReleaseNeedsForce says the same of an operator's
	// release, for a keeper's decision made by Inspect or Apply.
	NeedsForce        bool
	ForceReason       string
	ReleaseNeedsForce bool
	// Why explains a keeper's decision (Query.Release false) in one
	// sentence, for people; set by Inspect and Apply.
	Why string

	// Written tells that Keep made the decision's write; Warning is the
	// reason of the Warning event it emitted, if any; HeldFor is, for a
	// release or a collection it made, how long the lock was held: from
	// its record's acquisition, or its creation.
	Written bool
	Warning string
	HeldFor time.Duration

	obs engine.Observation
	d   engine.Decision
}

// Inspect reads, through r, the lock of the Cluster q names, the Cluster
// and the Machines the lock and the Cluster's grant register name, each
// once, and decides on what it read. r may be a cache, a snapshot of
// listed objects or the API server: the Status is as fresh as r. A
// missing object is not an error; an API error names the object it was
// reading and wraps the API server's error.
func Inspect(ctx context.Context, r client.Reader, q Query) (Status, error) {
	eq := engine.Query{Namespace: q.Namespace, ClusterName: q.Cluster, APIVersion: capi.Group + "/" + q.CAPIVersion}
	obs, cm, err := engine.Read(ctx, engine.From(r), eq)
	if err != nil {
		return Status{}, err
	}
	return status(q, cm, obs), nil
}

// status decides on obs, read from cm, as q says, and describes both.
func status(q Query, cm *corev1.ConfigMap, obs engine.Observation) Status {
	if q.Release {
		obs.Intent, obs.Force = engine.IntentRelease, q.Force
	}
	return describe(q, cm, obs, engine.Decide(obs, q.Policy.engine(), q.Now), true)
}

// describe is the Status of decision d on obs, read from cm; explain adds
// what only people read (Why, ReleaseNeedsForce), which a keeper's
// reconcile does not need.
func describe(q Query, cm *corev1.ConfigMap, obs engine.Observation, d engine.Decision, explain bool) Status {
	s := Status{Query: q, ConfigMap: cm, obs: obs, d: d,
		Verdict: string(d.Verdict), Owner: string(d.Owner), Action: string(d.Action), Writes: d.Writes(),
		Holder: d.Holder, Reason: d.Reason, Wait: string(d.Wait), RequeueAfter: d.RequeueAfter, Err: d.Err,
		NeedsForce: d.NeedsForce, ForceReason: d.ForceReason}
	s.LockName, _ = engine.LockName(q.Cluster)
	if l := obs.Lock; l != nil {
		s.LockExists, s.LockProblem, s.LockUID, s.LockResourceVersion = true, l.Problem, l.UID, l.ResourceVersion
		s.Created, s.ClusterAbsentSince, s.Protection = l.Created, l.ClusterAbsentSince, protection(l)
		if l.Problem == nil {
			s.RecordHolder = l.Record.MachineName
		}
		s.HolderExists = obs.Holder != nil
	}
	if cl := obs.Cluster; cl != nil {
		s.ClusterExists, s.ClusterInitialized, s.ClusterPaused, s.ClusterUID = true, cl.Initialized, cl.Paused, cl.UID
		s.Grant = cl.Grant.Raw()
		if cl.Grant.Held() {
			s.GrantHolder = cl.Grant.MachineName
		}
	}
	if obs.Lock == nil && d.Verdict == engine.VerdictLost {
		s.HolderExists = true // a grant is only ever read from an existing Machine
	}
	if explain && !q.Release {
		s.Why = engine.Explain(obs, d, q.Policy.engine())
		rel := obs
		rel.Intent = engine.IntentRelease
		s.ReleaseNeedsForce = engine.Decide(rel, engine.Policy{}, q.Now).NeedsForce
	}
	return s
}

// protection names how lock l stands against a delete.
func protection(l *engine.Lock) string {
	switch {
	case l.Problem != nil:
		return ""
	case l.Deleting:
		return "deleting"
	// A move mark lets a delete without options through, a release mark
	// only a delete bound to the lock's resourceVersion: a lock carrying
	// both (a restore can write both back) shows the weaker protection.
	case l.MoveMark:
		return "moving"
	case l.Releasable:
		return "releasable"
	}
	return "guarded"
}
