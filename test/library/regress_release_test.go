package library_test

import (
	"context"
	"sync"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	"github.com/initlock/initlock/internal/kubeenv"
	"github.com/initlock/initlock/pkg/initlock"
)

// TestReleaseOfAnyHolderLeavesWhatCameSince: a release of whoever holds the
// lock (the drop-in mutex's Unlock(cluster), CABPK's failed-init path)
// whose delete is applied but whose answer is lost goes on from a fresh
// read; another Machine granted the lock meanwhile keeps it and its grant.
// The release ends as done: what it set out to release is gone. (The
// explorer's scenario mutex-unlock-lost is the same fault.)
func TestReleaseOfAnyHolderLeavesWhatCameSince(t *testing.T) {
	for _, tt := range []struct {
		name string
		// setup makes the lock the release finds: held by m1.
		setup func(f *fixture, m1 *unstructured.Unstructured)
	}{
		{"the lock and grant of initlock's Lock", func(f *fixture, m1 *unstructured.Unstructured) { f.mustLock(m1) }},
		{"an upstream lock", func(f *fixture, _ *unstructured.Unstructured) { f.upstreamLock("m1", f.clusterRef()) }},
	} {
		t.Run(tt.name, func(t *testing.T) {
			f := newFixture(t)
			m1, m2, m3 := f.machine("m1"), f.machine("m2"), f.machine("m3")
			tt.setup(f, m1)
			var once sync.Once
			var res initlock.Result
			var lockErr error
			base, err := client.NewWithWatch(f.counter.CountingConfig(env.Config), client.Options{Scheme: kubeenv.Scheme()})
			if err != nil {
				t.Fatal(err)
			}
			lossy := interceptor.NewClient(base, interceptor.Funcs{
				Delete: func(ctx context.Context, c client.WithWatch, obj client.Object, opts ...client.DeleteOption) error {
					if err := c.Delete(ctx, obj, opts...); err != nil {
						return err
					}
					lost := false
					once.Do(func() {
						lost = true
						res, lockErr = initlock.New(f.admin).Lock(context.WithoutCancel(ctx), f.get(f.cluster), f.get(m2))
					})
					if lost {
						return unavailable
					}
					return nil
				},
			})
			if !newMutex(lossy).Unlock(t.Context(), f.get(f.cluster)) {
				t.Errorf("Unlock() = false, want true: the lock it found is released")
			}
			expectAcquired(t, "m2", res, lockErr)
			f.expectHeld(t, "m2")
			f.lockLive(t, f.get(m3), "m2")
		})
	}
}
