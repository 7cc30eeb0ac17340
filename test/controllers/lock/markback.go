package locksuite

import (
	"context"
	"errors"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	"github.com/initlock/initlock/internal/kubeenv"
	"github.com/initlock/initlock/internal/kubeenv/wire"
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
	for _, tc := range []struct {
		name string
		// onPatch runs before the n-th patch of the lock (from 1) is sent;
		// a non-nil error is its answer, the patch sent first when send
		// is set.
		onPatch func(f *fixture, n int) (send bool, err error)
		// wantLabel is a label another writer put on the lock meanwhile.
		wantLabel string
	}{
		{
			name: "the mark's answer lost, the holder back just before it",
			onPatch: func(f *fixture, n int) (bool, error) {
				if n != 1 {
					return true, nil
				}
				f.machine("c1", "m1")
				return true, lost
			},
		},
		{
			name: "the holder back after the mark, the unmark failing once",
			onPatch: func(f *fixture, n int) (bool, error) {
				switch n {
				case 1:
					f.machine("c1", "m1") // the patch then goes out
				case 2:
					return false, apierrors.NewServiceUnavailable("etcd leader changed")
				}
				return true, nil
			},
		},
		{
			name: "the holder back after the mark, another writer's label before the unmark",
			onPatch: func(f *fixture, n int) (bool, error) {
				switch n {
				case 1:
					f.machine("c1", "m1")
				case 2:
					cm := kubeenv.MustGetLock(f.t, f.c, f.ns, "c1")
					before := cm.DeepCopy()
					cm.Labels["example.com/team"] = "blue"
					if err := f.c.Patch(f.t.Context(), cm, client.MergeFrom(before)); err != nil {
						f.t.Fatal(err)
					}
				}
				return true, nil
			},
			wantLabel: "blue",
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t, b)
			cl := f.cluster("c1")
			cm := f.lockCM("c1", "m1", cl, "") // m1 does not exist
			f.clock.SetTime(cm.CreationTimestamp.Add(grace + time.Minute))
			patches := 0
			c := interceptor.NewClient(f.c, interceptor.Funcs{
				Patch: func(ctx context.Context, c client.WithWatch, obj client.Object, patch client.Patch, opts ...client.PatchOption) error {
					if _, ok := obj.(*corev1.ConfigMap); !ok {
						return c.Patch(ctx, obj, patch, opts...)
					}
					patches++
					send, err := tc.onPatch(f, patches)
					if send {
						if perr := c.Patch(ctx, obj, patch, opts...); perr != nil || err == nil {
							return perr
						}
					}
					return err
				},
			})
			f.r.Client, f.r.APIReader = c, c
			_, _ = f.r.Reconcile(t.Context(), ctrl.Request{NamespacedName: types.NamespacedName{Namespace: f.ns, Name: "c1"}})
			if patches == 0 {
				t.Fatal("the reconciler did not mark the lock of the gone holder")
			}
			got := kubeenv.MustGetLock(t, f.c, f.ns, "c1")
			if got == nil {
				t.Fatal("the lock of m1, back, was released")
			}
			if _, marked := got.Annotations[wire.ReleaseAnnotation]; marked {
				t.Errorf("the release mark was left on the lock m1 holds: %v", got.Annotations)
			}
			if tc.wantLabel != "" && got.Labels["example.com/team"] != tc.wantLabel {
				t.Errorf("the other writer's label was lost: %v", got.Labels)
			}
			if err := f.c.Delete(t.Context(), got); err == nil {
				t.Error("the lock guard let a plain delete of the held lock through")
			}
		})
	}
}
