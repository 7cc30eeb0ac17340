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
	ctrl "sigs.k8s.io/controller-runtime"
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
		// on runs before request r (its verb and kind, "patch ConfigMap")
		// is sent, the n-th of its kind (from 1), when marked tells that
		// the release mark was sent already; a non-nil error is its
		// answer, the request sent first when send is set.
		on func(f *fixture, r string, n int, marked bool) (send bool, err error)
		// wantLabel and wantMove: another writer's label and a move's
		// delete-for-move put on the lock meanwhile, which stay.
		wantLabel, wantMove bool
		// paused: the Cluster is paused meanwhile; the release leaves its
		// mark to the keepers, to be taken off once it is unpaused.
		paused bool
	}{
		{
			name: "the mark's answer lost, the holder back just before it",
			on: func(f *fixture, r string, n int, _ bool) (bool, error) {
				if r == "patch ConfigMap" && n == 1 {
					holderBack(f)
					return true, lost
				}
				return true, nil
			},
		},
		{
			name: "the mark's answer lost, the holder back, the lock's first reading again failing",
			on: func(f *fixture, r string, n int, marked bool) (bool, error) {
				switch {
				case r == "patch ConfigMap" && n == 1:
					holderBack(f)
					return true, lost
				case r == "get ConfigMap" && marked && n == 2:
					return false, unavailable
				}
				return true, nil
			},
		},
		{
			name: "the holder back after the mark, the unmark failing once",
			on: func(f *fixture, r string, n int, _ bool) (bool, error) {
				switch {
				case r == "patch ConfigMap" && n == 1:
					holderBack(f)
				case r == "patch ConfigMap" && n == 2:
					return false, unavailable
				}
				return true, nil
			},
		},
		{
			name: "the holder back after the mark, the unmark turned down once for too many requests",
			on: func(f *fixture, r string, n int, _ bool) (bool, error) {
				switch {
				case r == "patch ConfigMap" && n == 1:
					holderBack(f)
				case r == "patch ConfigMap" && n == 2:
					return false, apierrors.NewTooManyRequests("slow down", 0)
				}
				return true, nil
			},
		},
		{
			name: "the holder back after the mark, another writer's label before the unmark",
			on: func(f *fixture, r string, n int, _ bool) (bool, error) {
				switch {
				case r == "patch ConfigMap" && n == 1:
					holderBack(f)
				case r == "patch ConfigMap" && n == 2:
					label(f)
				}
				return true, nil
			},
			wantLabel: true,
		},
		{
			name: "the holder back after the mark, the Cluster's reading again failing",
			on: func(f *fixture, r string, n int, marked bool) (bool, error) {
				switch {
				case r == "patch ConfigMap" && n == 1:
					holderBack(f)
				case r == "get Cluster" && marked:
					return false, unavailable
				}
				return true, nil
			},
		},
		{
			name: "the holder back after the reading again, the delete failing",
			on: func(f *fixture, r string, n int, _ bool) (bool, error) {
				if r == "delete ConfigMap" && n == 1 {
					holderBack(f)
					return false, unavailable
				}
				return true, nil
			},
		},
		{
			name: "the holder back after the reading again, another writer's label before the delete",
			on: func(f *fixture, r string, n int, _ bool) (bool, error) {
				if r == "delete ConfigMap" && n == 1 {
					holderBack(f)
					label(f)
				}
				return true, nil
			},
			wantLabel: true,
		},
		{
			name: "the holder back after the mark, a move pausing the Cluster and marking the lock before the unmark",
			on: func(f *fixture, r string, n int, _ bool) (bool, error) {
				switch {
				case r == "patch ConfigMap" && n == 1:
					holderBack(f)
				case r == "patch ConfigMap" && n == 2:
					f.pauseAndMarkForMove()
				}
				return true, nil
			},
			wantMove: true,
		},
		{
			name: "the holder back and the manager stopping after the mark",
			on: func(f *fixture, r string, n int, marked bool) (bool, error) {
				switch {
				case r == "patch ConfigMap" && n == 1:
					holderBack(f)
				case marked:
					f.stop() // the request after the mark goes out cancelled
				}
				return true, nil
			},
		},
		{
			name: "the holder back and the Cluster paused after the mark",
			on: func(f *fixture, r string, n int, _ bool) (bool, error) {
				if r == "patch ConfigMap" && n == 1 {
					holderBack(f)
					f.pause()
				}
				return true, nil
			},
			paused: true,
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t, b)
			cl := f.cluster("c1")
			cm := f.lockCM("c1", "m1", cl, "") // m1 does not exist
			f.clock.SetTime(cm.CreationTimestamp.Add(grace + time.Minute))
			c := f.faulty(tc.on)
			f.r.Client, f.r.APIReader = c, c
			ctx, stop := context.WithCancel(t.Context())
			defer stop()
			f.stop = stop
			_, _ = f.r.Reconcile(ctx, ctrl.Request{NamespacedName: types.NamespacedName{Namespace: f.ns, Name: "c1"}})
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
				f.reconcile("c1")
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

// faulty is a client of the fixture's backend that calls on before each
// get, patch and delete (see MarkNeverOutlivesRelease's cases), one call at
// a time: a reader reads the lock and the Cluster in parallel.
func (f *fixture) faulty(on func(f *fixture, r string, n int, marked bool) (bool, error)) client.WithWatch {
	var mu sync.Mutex
	counts := map[string]int{}
	marked := false
	decide := func(r string) (bool, error) {
		mu.Lock()
		defer mu.Unlock()
		counts[r]++
		send, err := on(f, r, counts[r], marked)
		if r == "patch ConfigMap" {
			marked = true
		}
		return send, err
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
