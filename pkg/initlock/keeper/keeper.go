package keeper

import (
	"context"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/clock"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/initlock/initlock/pkg/initlock"
	"github.com/initlock/initlock/pkg/initlock/engine"
)

// Retry intervals of Report.RequeueAfter.
const (
	// foreignRecheck is how often a ConfigMap found not to be a lock is
	// looked at again, so that a caller's state notices when it goes away
	// (it is not in a cache of labelled ConfigMaps, so its deletion sends
	// no event).
	foreignRecheck = 5 * time.Minute
	// conflictRetry is how soon a Cluster whose write met a conflict is
	// looked at again, should no event about the newer lock come first.
	conflictRetry = time.Second
	// cacheLagRetry is how soon a Cluster waiting for the cache to show the
	// Keeper's own last write is looked at again, should the watch event
	// not come first.
	cacheLagRetry = 10 * time.Second
)

// Policy is what a Keeper is configured to do: release after init, the
// orphan grace and settle times.
type Policy = engine.Policy

// DefaultPolicy returns the manager's default policy, less OrphanSettle,
// which a watching keeper sets (the manager's --orphan-settle): a one-shot
// repair has no watch to settle.
func DefaultPolicy() Policy { return engine.DefaultPolicy }

// Keeper keeps the init lock of each Cluster owned, releases it after init
// and collects it when orphaned. Set the exported fields before the first
// Keep and do not change them after.
type Keeper struct {
	// Client reads, possibly through a cache, and writes to the API
	// server.
	Client client.Client
	// APIReader reads the API server directly, to confirm what a cache
	// cannot show.
	APIReader client.Reader
	// Recorder, when set, receives the events.
	Recorder initlock.EventRecorder
	// CAPIVersion is the Cluster API version served (v1beta2 or v1beta1).
	CAPIVersion string
	// Policy says what to release and when to collect.
	Policy Policy
	// Clock gives the time of decisions; nil is the real clock.
	Clock clock.PassiveClock
	// WatchFilter, when set, limits the adoption of locks to those of
	// Clusters labelled with the watch-filter label of Cluster API
	// (cluster.x-k8s.io/watch-filter) with this value; every lock is
	// released and collected when that is safe.
	WatchFilter string

	mu    sync.Mutex
	memos map[types.NamespacedName]*memo
}

// Report is what one Keep found and did.
type Report struct {
	// Seen tells that Keep found what state the lock is in; State is then
	// the verdict on it, empty when there is no lock to track (none, or
	// one whose Cluster and grant say it was lost).
	Seen  bool
	State initlock.Verdict
	// Action is the write made to the lock, empty when none was made.
	// Reason is a release's reason ("initialized", "cluster-deleting",
	// "holder-gone").
	Action initlock.Action
	Reason string
	// HeldFor is, for a release or a collection, how long the lock was
	// held: from its record's acquisition, or its creation.
	HeldFor time.Duration
	// Warning is the reason of the Warning event Keep emitted, if any.
	Warning string
	// RequeueAfter is when to look at the Cluster again, should no event
	// come first; zero for not at all.
	RequeueAfter time.Duration
}

func (k *Keeper) now() time.Time {
	if k.Clock == nil {
		return time.Now()
	}
	return k.Clock.Now()
}

// Keep looks at the lock of the Cluster key names and makes at most one
// write to it. It decides on what Client shows; a decision that writes is
// confirmed against APIReader first (see the package documentation). An
// error is returned only when a read or a write failed in a way the next
// Keep may not repair by itself; a lost race or a lagging cache is a
// Report.RequeueAfter.
func (k *Keeper) Keep(ctx context.Context, key types.NamespacedName) (Report, error) {
	t, rep, done, err := k.observe(ctx, key)
	if done || err != nil {
		return rep, err
	}
	d := engine.Decide(t.obs, k.Policy, k.now())
	if d.Wait == engine.WaitPaused {
		ctrl.LoggerFrom(ctx).V(4).Info("Cluster is paused; leaving its lock alone")
		return Report{}, nil
	}
	if t.cm == nil {
		// No lock in the cache: look for one the cache cannot show.
		if rep, done, err := k.lookLive(ctx, &t); done || err != nil {
			return rep, err
		}
		d = engine.Decide(t.obs, k.Policy, k.now())
	}
	return k.act(ctx, t, d)
}
