package lock

import (
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/metrics"
)

var (
	locksGauge = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "initlock_locks",
		Help: "Init locks by state (the verdict of the last reconcile).",
	}, []string{"state"})
	adoptionsTotal = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "initlock_lock_adoptions_total",
		Help: "Locks re-pointed at their Cluster's current UID.",
	})
	releasesTotal = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "initlock_lock_releases_total",
		Help: "Locks released, by reason (initialized, cluster-deleting, holder-gone).",
	}, []string{"reason"})
	absenceMarksTotal = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "initlock_lock_absence_marks_total",
		Help: "Locks on which the absence of their Cluster was recorded (the cluster-absent-since annotation), after the orphan settle time.",
	})
	orphansCollectedTotal = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "initlock_orphan_locks_collected_total",
		Help: "Orphan locks deleted after their grace period.",
	})
	warningsTotal = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "initlock_lock_warnings_total",
		Help: "Warning events emitted, by reason (CorruptLock, ForeignConfigMap, LockConflict).",
	}, []string{"reason"})
	eventsDroppedTotal = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "initlock_events_dropped_total",
		Help: "Normal events not emitted because the event budget (--event-qps, --event-burst) was spent, by reason.",
	}, []string{"reason"})
	holdDuration = prometheus.NewHistogram(prometheus.HistogramOpts{
		Name: "initlock_lock_hold_duration_seconds",
		Help: "How long a lock was held, from its acquisition (or creation) to its release or collection.",
		// 10 s to about 2.3 days.
		Buckets: prometheus.ExponentialBuckets(10, 3, 10),
	})
)

// gaugeStates are the states initlock_locks reports, all present from the
// start so that dashboards see zeros rather than missing series.
// gaugeStates are the states of initlock_locks: the verdicts of
// keeper.Status but "free" and "lost", where no lock stands.
var gaugeStates = []string{"foreign", "corrupt", "orphan", "held-after-init", "conflict", "stale-holder", "unowned", "healthy"}

var registerOnce sync.Once

// registerMetrics adds the metrics to the controller-runtime registry once
// per process, however many managers it runs.
func registerMetrics() {
	registerOnce.Do(func() {
		metrics.Registry.MustRegister(locksGauge, adoptionsTotal, releasesTotal, absenceMarksTotal, orphansCollectedTotal, warningsTotal, eventsDroppedTotal, holdDuration, stateSince{}, plannedGauge)
		for _, a := range plannedActions {
			plannedGauge.WithLabelValues(a)
		}
		for _, v := range gaugeStates {
			locksGauge.WithLabelValues(v)
		}
		for _, r := range []string{"initialized", "cluster-deleting", "holder-gone"} {
			releasesTotal.WithLabelValues(r)
		}
		for _, r := range []string{"CorruptLock", "ForeignConfigMap", "LockConflict"} {
			warningsTotal.WithLabelValues(r)
		}
		for _, r := range []string{"LockAdopted", "LockReleased", "OrphanLockCollected"} {
			eventsDroppedTotal.WithLabelValues(r)
		}
	})
}

// stateTracker keeps the verdict of every lock a reconciler has seen, so the
// gauge counts each lock once, and since when it has had it
// (StateSinceMetric). Several reconcilers in one process (several
// managers) add up; each takes its share out when its manager stops.
type stateTracker struct {
	mu     sync.Mutex
	states map[types.NamespacedName]string
	since  map[types.NamespacedName]time.Time
}

// set records the verdict of a cluster's lock; "" forgets it.
func (t *stateTracker) set(key types.NamespacedName, v string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	old := t.states[key]
	if old == v {
		return
	}
	if old != "" {
		locksGauge.WithLabelValues(old).Dec()
	}
	if v == "" {
		delete(t.states, key)
		delete(t.since, key)
		return
	}
	if t.states == nil {
		t.states = map[types.NamespacedName]string{}
		t.since = map[types.NamespacedName]time.Time{}
		trackers.add(t)
	}
	t.states[key] = v
	t.since[key] = time.Now()
	locksGauge.WithLabelValues(v).Inc()
}

// reset takes every recorded verdict out of the gauge.
func (t *stateTracker) reset() {
	t.mu.Lock()
	defer t.mu.Unlock()
	for _, v := range t.states {
		locksGauge.WithLabelValues(v).Dec()
	}
	t.states, t.since = nil, nil
	trackers.remove(t)
}

// StateSinceMetric is the gauge, computed at each scrape, of since when
// the lock longest in each state has been in it: what the alerts of
// config/monitoring compare with the time, so that a restore storm, in
// which many locks pass through a state each for a short while, does not
// look like one lock stuck in it.
const StateSinceMetric = "initlock_lock_state_since_timestamp_seconds"

var stateSinceDesc = prometheus.NewDesc(StateSinceMetric,
	"For each state of initlock_locks, the time (Unix seconds) since which the lock that has been in it longest has been in it, as this manager saw it; no sample while no lock is in the state.",
	[]string{"state"}, nil)

// trackers are the stateTrackers holding verdicts, for stateSince.
var trackers = trackerSet{set: map[*stateTracker]struct{}{}}

type trackerSet struct {
	mu  sync.Mutex
	set map[*stateTracker]struct{}
}

func (s *trackerSet) add(t *stateTracker) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.set[t] = struct{}{}
}

func (s *trackerSet) remove(t *stateTracker) {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.set, t)
}

// stateSince collects StateSinceMetric from every tracker.
type stateSince struct{}

func (stateSince) Describe(ch chan<- *prometheus.Desc) { ch <- stateSinceDesc }

func (stateSince) Collect(ch chan<- prometheus.Metric) {
	// A tracker adds itself while holding its own lock: take the list
	// first, then each tracker's lock.
	trackers.mu.Lock()
	all := make([]*stateTracker, 0, len(trackers.set))
	for t := range trackers.set {
		all = append(all, t)
	}
	trackers.mu.Unlock()
	oldest := map[string]time.Time{}
	for _, t := range all {
		t.mu.Lock()
		for key, v := range t.states {
			if since, ok := oldest[v]; !ok || t.since[key].Before(since) {
				oldest[v] = t.since[key]
			}
		}
		t.mu.Unlock()
	}
	for v, since := range oldest {
		ch <- prometheus.MustNewConstMetric(stateSinceDesc, prometheus.GaugeValue, float64(since.UnixMilli())/1000, v)
	}
}
