package locksuite

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	"github.com/initlock/initlock/internal/kubeenv"
	"github.com/initlock/initlock/internal/kubeenv/wire"
	"github.com/initlock/initlock/pkg/initlock/capi"
)

// MarkNeverOutlivesRelease is a regression test: the manager releases the
// lock of a gone holder, the holder comes back (a restore, a re-creation
// under its name) around the release mark, and a request of the release
// fails. An earlier Keep returned at the failure and left the mark on the
// held lock, so that the lock guard let a plain delete of it through until
// a later reconcile took the mark off, 30 s after it was written.
//
// What makes it safe now: a mark whose outcome is not known is read again
// live and followed through (the holder read again, the mark taken off),
// and an unmark that fails, or meets another writer's change, is retried
// on the lock read again while it still carries the release's mark.
func MarkNeverOutlivesRelease(t *testing.T, b Backend) {
	lost := errors.New("connection reset by peer")
	unavailable := apierrors.NewServiceUnavailable("etcd leader changed")
	holderBack := func(f *fixture) { f.machine("c1", "m1") }
	label := func(f *fixture) {
		cm := kubeenv.MustGetLock(f.t, f.c, f.ns, "c1")
		before := cm.DeepCopy()
		cm.Labels["example.com/team"] = "blue"
		if err := f.c.Patch(f.t.Context(), cm, client.MergeFrom(before)); err != nil {
			f.t.Fatal(err)
		}
	}
	for _, tc := range []struct {
		name string
		// rules are the faults of the case (see fault).
		rules []fault
		// wantLabel and wantMove: another writer's label and a move's
		// delete-for-move put on the lock meanwhile, which stay.
		wantLabel, wantMove bool
		// paused: the Cluster is paused meanwhile; the release leaves its
		// mark to the keepers, to be taken off once it is unpaused.
		paused bool
	}{
		{
			name:  "the mark's answer lost, the holder back just before it",
			rules: []fault{{r: "patch ConfigMap", n: 1, do: holderBack, err: lost}},
		},
		{
			name: "the mark's answer lost, the holder back, the lock's first reading again failing",
			rules: []fault{{r: "patch ConfigMap", n: 1, do: holderBack, err: lost},
				{r: "get ConfigMap", n: 2, marked: true, drop: true, err: unavailable}},
		},
		{
			name: "the holder back after the mark, the unmark failing once",
			rules: []fault{{r: "patch ConfigMap", n: 1, do: holderBack},
				{r: "patch ConfigMap", n: 2, drop: true, err: unavailable}},
		},
		{
			name: "the holder back after the mark, the unmark turned down once for too many requests",
			rules: []fault{{r: "patch ConfigMap", n: 1, do: holderBack},
				{r: "patch ConfigMap", n: 2, drop: true, err: apierrors.NewTooManyRequests("slow down", 0)}},
		},
		{
			name:      "the holder back after the mark, another writer's label before the unmark",
			rules:     []fault{{r: "patch ConfigMap", n: 1, do: holderBack}, {r: "patch ConfigMap", n: 2, do: label}},
			wantLabel: true,
		},
		{
			name: "the holder back after the mark, the Cluster's reading again failing",
			rules: []fault{{r: "patch ConfigMap", n: 1, do: holderBack},
				{r: "get Cluster", marked: true, drop: true, err: unavailable}},
		},
		{
			name:  "the holder back after the reading again, the delete failing",
			rules: []fault{{r: "delete ConfigMap", n: 1, do: holderBack, drop: true, err: unavailable}},
		},
		{
			name: "the holder back after the reading again, another writer's label before the delete",
			rules: []fault{{r: "delete ConfigMap", n: 1, do: func(f *fixture) {
				holderBack(f)
				label(f)
			}}},
			wantLabel: true,
		},
		{
			name: "the holder back after the mark, a move pausing the Cluster and marking the lock before the unmark",
			rules: []fault{{r: "patch ConfigMap", n: 1, do: holderBack},
				{r: "patch ConfigMap", n: 2, do: (*fixture).pauseAndMarkForMove}},
			wantMove: true,
		},
		{
			name: "the holder back and the manager stopping after the mark",
			// The request after the mark goes out cancelled.
			rules: []fault{{r: "patch ConfigMap", n: 1, do: holderBack}, {marked: true, do: func(f *fixture) { f.stop() }}},
		},
		{
			name: "the holder back and the Cluster paused after the mark",
			rules: []fault{{r: "patch ConfigMap", n: 1, do: func(f *fixture) {
				holderBack(f)
				f.pause()
			}}},
			paused: true,
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t, b)
			cl := f.cluster("c1")
			cm := f.lockCM("c1", "m1", cl, "") // m1 does not exist
			f.clock.SetTime(cm.CreationTimestamp.Add(grace + time.Minute))
			c := f.faulty(tc.rules)
			f.r.Client, f.r.APIReader = c, c
			ctx, stop := context.WithCancel(t.Context())
			defer stop()
			f.stop = stop
			_, _ = f.r.Reconcile(ctx, f.request())
			got := kubeenv.MustGetLock(t, f.c, f.ns, "c1")
			if got == nil {
				t.Fatal("the lock of m1, back, was released")
			}
			if tc.wantLabel && got.Labels["example.com/team"] != "blue" {
				t.Errorf("the other writer's label was lost: %v", got.Labels)
			}
			if _, moving := got.Annotations[wire.MoveAnnotation]; tc.wantMove && !moving {
				t.Errorf("the move's delete-for-move was taken off the lock of the paused Cluster: %v", got.Annotations)
			}
			if tc.paused {
				// Left to the keepers while the Cluster is paused: taken
				// off once it is unpaused.
				f.unpause()
				f.clock.SetTime(f.clock.Now().Add(wire.ReleaseMarkGrace + time.Second))
				f.r.Client, f.r.APIReader = f.c, f.c
				f.reconcile()
				got = kubeenv.MustGetLock(t, f.c, f.ns, "c1")
			}
			if _, marked := got.Annotations[wire.ReleaseAnnotation]; marked {
				t.Errorf("the release mark was left on the lock m1 holds: %v", got.Annotations)
			}
			if tc.wantMove {
				return // a move's mark lets its delete through
			}
			if err := f.c.Delete(t.Context(), got); err == nil {
				t.Error("the lock guard let a plain delete of the held lock through")
			}
		})
	}
}

// fault is a fault of MarkNeverOutlivesRelease's cases: before request r
// (its verb and kind, "patch ConfigMap"; any when empty) is sent, the n-th
// of its kind (from 1; any when 0), once the release mark was sent when
// marked is set, do runs (when not nil), and the request is answered with
// err, sent first unless drop is set.
type fault struct {
	r      string
	n      int
	marked bool
	do     func(*fixture)
	drop   bool
	err    error
}

// faulty is a client of the fixture's backend that applies, before each
// get, patch and delete, the first of faults that matches it, one call at
// a time: a reader reads the lock and the Cluster in parallel.
func (f *fixture) faulty(faults []fault) client.WithWatch {
	var mu sync.Mutex
	counts := map[string]int{}
	marked := false
	decide := func(r string) (bool, error) {
		mu.Lock()
		defer mu.Unlock()
		counts[r]++
		wasMarked := marked
		if r == "patch ConfigMap" {
			marked = true
		}
		for _, x := range faults {
			if (x.r == "" || x.r == r) && (x.n == 0 || x.n == counts[r]) && (!x.marked || wasMarked) {
				if x.do != nil {
					x.do(f)
				}
				return !x.drop, x.err
			}
		}
		return true, nil
	}
	do := func(verb string, obj client.Object, call func() error) error {
		r := verb + " " + kindOf(obj)
		send, err := decide(r)
		if send {
			if cerr := call(); cerr != nil || err == nil {
				return cerr
			}
		}
		return err
	}
	return interceptor.NewClient(f.c, interceptor.Funcs{
		Get: func(ctx context.Context, c client.WithWatch, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
			return do("get", obj, func() error { return c.Get(ctx, key, obj, opts...) })
		},
		Patch: func(ctx context.Context, c client.WithWatch, obj client.Object, patch client.Patch, opts ...client.PatchOption) error {
			return do("patch", obj, func() error { return c.Patch(ctx, obj, patch, opts...) })
		},
		Delete: func(ctx context.Context, c client.WithWatch, obj client.Object, opts ...client.DeleteOption) error {
			return do("delete", obj, func() error { return c.Delete(ctx, obj, opts...) })
		},
	})
}

// kindOf is the kind of obj: a typed ConfigMap, or what its GVK says.
func kindOf(obj client.Object) string {
	if _, ok := obj.(*corev1.ConfigMap); ok {
		return "ConfigMap"
	}
	return obj.GetObjectKind().GroupVersionKind().Kind
}

// pause sets the Cluster's spec.paused, as clusterctl move does first;
// unpause clears it.
func (f *fixture) pause()   { f.setPaused(true) }
func (f *fixture) unpause() { f.setPaused(false) }

func (f *fixture) setPaused(paused bool) {
	f.t.Helper()
	u := &unstructured.Unstructured{}
	u.SetGroupVersionKind(capi.ClusterGVK(capi.V1Beta2))
	u.SetNamespace(f.ns)
	u.SetName("c1")
	patch := fmt.Sprintf(`{"spec":{"paused":%t}}`, paused)
	if err := f.c.Patch(f.t.Context(), u, client.RawPatch(types.MergePatchType, []byte(patch))); err != nil {
		f.t.Fatal(err)
	}
}

// pauseAndMarkForMove is clusterctl move on the source: the Cluster
// paused, then the lock marked delete-for-move.
func (f *fixture) pauseAndMarkForMove() {
	f.t.Helper()
	f.pause()
	cm := kubeenv.MustGetLock(f.t, f.c, f.ns, "c1")
	before := cm.DeepCopy()
	cm.Annotations[wire.MoveAnnotation] = ""
	if err := f.c.Patch(f.t.Context(), cm, client.MergeFrom(before)); err != nil {
		f.t.Fatal(err)
	}
}
