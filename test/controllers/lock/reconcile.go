package locksuite

import (
	"fmt"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/initlock/initlock/internal/kubeenv"
	"github.com/initlock/initlock/internal/kubeenv/wire"
	"github.com/initlock/initlock/pkg/initlock/capi"
)

// step is one reconcile and what it must do.
type step struct {
	advance     time.Duration
	wantWrites  int
	wantRequeue time.Duration
}

// Reconcile runs reconciles of one Cluster's lock, step by step, and
// checks each step's writes and requeue, then the lock and the events.
func Reconcile(t *testing.T, b Backend) {
	paused := func(u *unstructured.Unstructured) {
		u.SetAnnotations(map[string]string{capi.PausedAnnotation: ""})
	}
	for _, tc := range []struct {
		name string
		// set up creates the objects of cluster "c1".
		setUp func(f *fixture)
		steps []step
		// check looks at the lock after the last step.
		check      func(f *fixture) error
		wantEvents []emitted
	}{
		{
			name: "healthy: no write",
			setUp: func(f *fixture) {
				c := f.cluster("c1")
				f.machine("c1", "m1")
				f.lockCM("c1", "m1", c, "")
			},
			steps: []step{{}, {}},
		},
		{
			name: "unowned: adopted with one write, then healthy",
			setUp: func(f *fixture) {
				f.cluster("c1")
				f.machine("c1", "m1")
				f.lockCM("c1", "m1", nil, "")
			},
			steps:      []step{{wantWrites: 1}, {}},
			check:      ownedByCluster,
			wantEvents: []emitted{{corev1.EventTypeNormal, "LockAdopted"}},
		},
		{
			name: "initialised: released with two writes",
			setUp: func(f *fixture) {
				c := f.cluster("c1")
				f.machine("c1", "m1")
				f.lockCM("c1", "m1", c, "")
				f.setInitialized(c)
			},
			steps: []step{{wantWrites: 2}, {}}, // the release mark, the delete
			check: func(f *fixture) error {
				cm, err := kubeenv.GetLock(f.t.Context(), f.c, f.ns, "c1")
				if cm != nil {
					return fmt.Errorf("lock of an initialised Cluster still exists")
				}
				return err
			},
			wantEvents: []emitted{{corev1.EventTypeNormal, "LockReleased"}},
		},
		{
			name: "paused by annotation: no write, no event, even for a corrupt lock",
			setUp: func(f *fixture) {
				f.cluster("c1", paused)
				f.lockCM("c1", "m1", nil, "garbage")
			},
			steps: []step{{}, {}},
			check: unowned,
		},
		{
			name: "paused by spec: an unowned lock is left unowned",
			setUp: func(f *fixture) {
				f.cluster("c1", kubeenv.Paused)
				f.machine("c1", "m1")
				f.lockCM("c1", "m1", nil, "")
			},
			steps: []step{{}, {}},
			check: unowned,
		},
		{
			name: "corrupt: one warning for the same resourceVersion, no write",
			setUp: func(f *fixture) {
				c := f.cluster("c1")
				f.lockCM("c1", "m1", c, "garbage")
			},
			steps:      []step{{}, {}, {}},
			check:      hasRecord("garbage"),
			wantEvents: []emitted{{corev1.EventTypeWarning, "CorruptLock"}},
		},
		{
			name: "ConfigMap with the lock's name but no label: warned about, left alone",
			setUp: func(f *fixture) {
				f.cluster("c1")
				cm := &corev1.ConfigMap{
					ObjectMeta: metav1.ObjectMeta{Namespace: f.ns, Name: "c1-lock"},
					Data:       map[string]string{"user-data": "keep me"},
				}
				f.create(cm)
			},
			// Reads go straight to the API server here, so the ConfigMap is
			// found without the live fallback the manager's label-filtered
			// cache needs (and its periodic recheck): see Injected
			// and test/manager's TestNotALock.
			steps: []step{{}, {}},
			check: func(f *fixture) error {
				cm, err := f.lock()
				if err != nil {
					return err
				}
				if cm.Data["user-data"] != "keep me" || len(cm.OwnerReferences) != 0 || len(cm.Annotations) != 0 {
					return fmt.Errorf("foreign ConfigMap changed: %+v", cm)
				}
				return nil
			},
			wantEvents: []emitted{{corev1.EventTypeWarning, "ForeignConfigMap"}},
		},
		{
			name: "orphan: recorded after the settle time, kept while its holder exists",
			setUp: func(f *fixture) {
				f.machine("c1", "m1")
				f.lockCM("c1", "m1", nil, "")
			},
			steps: []step{
				// First seen without its Cluster: wait for the settle time.
				{wantRequeue: settle},
				{advance: settle / 2, wantRequeue: settle / 2},
				// Settled: the absence is recorded on the lock, from the
				// first sight.
				{advance: settle / 2, wantWrites: 1, wantRequeue: grace - settle},
				// Past the grace period, the holder still exists.
				{advance: grace + time.Second, wantRequeue: grace},
			},
			check: func(f *fixture) error {
				cm, err := f.lock()
				if err != nil {
					return err
				}
				mark, ok := cm.Annotations[wire.ClusterAbsentAnnotation]
				if !ok {
					return fmt.Errorf("absence not recorded on the lock: %v", cm.Annotations)
				}
				if want := "2026-12-01T12:00:00Z " + string(cm.UID); mark != want {
					return fmt.Errorf("absence recorded as %q, want the first sight %q", mark, want)
				}
				return nil
			},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t, b)
			tc.setUp(f)
			for i, s := range tc.steps {
				f.clock.SetTime(f.clock.Now().Add(s.advance))
				res, writes := f.reconcile()
				if writes != s.wantWrites {
					t.Errorf("step %d: %d writes, want %d", i, writes, s.wantWrites)
				}
				if res.RequeueAfter != s.wantRequeue {
					t.Errorf("step %d: RequeueAfter = %s, want %s", i, res.RequeueAfter, s.wantRequeue)
				}
			}
			if tc.check != nil {
				if err := tc.check(f); err != nil {
					t.Error(err)
				}
			}
			f.wantEvents(tc.wantEvents...)
		})
	}
}

// OrphanCollectedAfterHolderGone follows an orphan lock to its end: the
// holder Machine is deleted after the grace period, and the lock is deleted
// with two writes (the release mark, the delete) and one event.
func OrphanCollectedAfterHolderGone(t *testing.T, b Backend) {
	f := newFixture(t, b)
	m := f.machine("c1", "m1")
	f.lockCM("c1", "m1", nil, "")
	for _, advance := range []time.Duration{0, settle, grace + time.Second} {
		f.clock.SetTime(f.clock.Now().Add(advance))
		f.reconcile()
	}
	if cm, err := kubeenv.GetLock(t.Context(), f.c, f.ns, "c1"); cm == nil {
		t.Fatalf("lock collected while its holder exists (%v)", err)
	}
	kubeenv.DeleteAndWait(t, f.c, m)

	if _, writes := f.reconcile(); writes != 2 {
		t.Errorf("collecting: %d writes, want 2 (the release mark, the delete)", writes)
	}
	if cm, err := kubeenv.GetLock(t.Context(), f.c, f.ns, "c1"); cm != nil || err != nil {
		t.Errorf("lock after collection: %v, %v, want none", cm, err)
	}
	if _, writes := f.reconcile(); writes != 0 {
		t.Errorf("after collection: %d writes, want 0", writes)
	}
	f.wantEvents(emitted{corev1.EventTypeNormal, "OrphanLockCollected"})
}
