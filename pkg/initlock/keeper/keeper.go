package keeper

import (
	"context"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/events"
	"k8s.io/utils/clock"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/initlock/initlock/pkg/initlock/internal/engine"
)

// Retry intervals of Status.RequeueAfter.
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

// Policy is what a keeper is configured to do.
type Policy struct {
	// ReleaseAfterInit releases a lock once the control plane is
	// initialised.
	ReleaseAfterInit bool
	// OrphanGrace is how long a Cluster must have been missing before its
	// lock is collected.
	OrphanGrace time.Duration
	// OrphanSettle is how long a keeper must have seen a lock without its
	// Cluster before it records the absence on the lock: a restore that
	// brings the Cluster back within it costs no write. Zero records it at
	// once. The mark records the first sight, so the settle time does not
	// lengthen the grace period; a settle time longer than OrphanGrace
	// counts as OrphanGrace.
	OrphanSettle time.Duration
}

// DefaultPolicy returns the manager's default policy, less OrphanSettle,
// which a watching keeper sets (the manager's --orphan-settle): a one-shot
// repair has no watch to settle.
func DefaultPolicy() Policy {
	p := engine.DefaultPolicy
	return Policy{ReleaseAfterInit: p.ReleaseAfterInit, OrphanGrace: p.OrphanGrace, OrphanSettle: p.OrphanSettle}
}

// engine is p as the decision takes it.
func (p Policy) engine() engine.Policy {
	return engine.Policy{ReleaseAfterInit: p.ReleaseAfterInit, OrphanGrace: p.OrphanGrace, OrphanSettle: p.OrphanSettle}
}

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
	Recorder events.EventRecorder
	// CAPIVersion is the Cluster API version served (v1beta2 or v1beta1).
	CAPIVersion string
	// Policy says what to release and when to collect.
	Policy Policy
	// Clock gives the time of decisions; nil is the real clock.
	Clock clock.PassiveClock
	// WatchFilter, when set, limits the adoption of locks to those of
	// Clusters labelled with the watch-filter label of Cluster API
	// (cluster.x-k8s.io/watch-filter) with this value, as Client shows
	// them; every lock is released and collected when that is safe.
	WatchFilter string

	mu    sync.Mutex
	memos map[types.NamespacedName]*memo
}

func (k *Keeper) now() time.Time {
	if k.Clock == nil {
		return time.Now()
	}
	return k.Clock.Now()
}

// Keep looks at the lock of the Cluster key names and makes at most one
// write to it. It decides on what Client shows; a decision that writes is
// confirmed against APIReader first (see the package documentation). It
// returns the Status of the lock as decided, with Written, Warning and
// HeldFor saying what it did; a zero Verdict when it did not look (the
// Cluster is paused, or the cache does not show its last write yet). An
// error is returned only when a read or a write failed in a way the next
// Keep may not repair by itself; a lost race or a lagging cache is a
// Status.RequeueAfter.
func (k *Keeper) Keep(ctx context.Context, key types.NamespacedName) (Status, error) {
	t, s, done, err := k.observe(ctx, key)
	if done || err != nil {
		return s, err
	}
	d := engine.Decide(t.obs, k.Policy.engine(), t.query.Now)
	if d.Wait == engine.WaitPaused {
		ctrl.LoggerFrom(ctx).V(4).Info("Cluster is paused; leaving its lock alone")
		return Status{}, nil
	}
	if t.cm == nil {
		// No lock in the cache: look for one the cache cannot show.
		if s, done, err := k.lookLive(ctx, &t, d); done || err != nil {
			return s, err
		}
		d = engine.Decide(t.obs, k.Policy.engine(), t.query.Now)
	}
	return k.act(ctx, t, d)
}
