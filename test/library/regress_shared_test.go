package library_test

import (
	"fmt"
	"sync"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/initlock/initlock/internal/kubeenv"
	"github.com/initlock/initlock/internal/kubeenv/wire"
	"github.com/initlock/initlock/pkg/initlock"
	"github.com/initlock/initlock/pkg/initlock/capi"
)

// TestRegressionSharedClusterObject: a provider passes one Cluster object,
// from its cache, to two Lock calls running at once (two Machines of the
// cluster reconciled in parallel). Lock writes the register it recorded
// back into that object while the other call reads it: an earlier Lock
// crashed the process (concurrent map read and write) or, under the race
// detector, failed. Run it with -race.
//
// Required: no crash and no data race, and at most one of the two
// Machines told it holds the lock, the one the register and the lock name.
func TestRegressionSharedClusterObject(t *testing.T) {
	f := newFixture(t)
	const rounds = 8
	for i := range rounds {
		name := fmt.Sprintf("s%d", i)
		shared := f.create(kubeenv.NewCluster(capi.V1Beta2, f.ns, name))
		ma := f.create(kubeenv.NewMachine(capi.V1Beta2, f.ns, name, name+"-a"))
		mb := f.create(kubeenv.NewMachine(capi.V1Beta2, f.ns, name, name+"-b"))

		var wg sync.WaitGroup
		start := make(chan struct{})
		results := make([]initlock.Result, 2)
		errs := make([]error, 2)
		for j, m := range []*unstructured.Unstructured{ma, mb} {
			wg.Go(func() {
				<-start
				results[j], errs[j] = f.locker.Lock(t.Context(), shared, m)
			})
		}
		close(start)
		wg.Wait()

		acquired := ""
		for j, m := range []string{ma.GetName(), mb.GetName()} {
			if errs[j] != nil {
				t.Errorf("round %d: Lock(%s): %v", i, m, errs[j])
			}
			if results[j].Acquired {
				if acquired != "" {
					t.Fatalf("round %d: both %s and %s were told they hold the lock", i, acquired, m)
				}
				acquired = m
			}
		}
		cm := &corev1.ConfigMap{}
		if err := env.Client.Get(t.Context(), client.ObjectKey{Namespace: f.ns, Name: name + "-lock"}, cm); err != nil {
			t.Fatalf("round %d: %v", i, err)
		}
		rec, err := wire.DecodeRecord(cm.Data[wire.DataKey])
		if err != nil {
			t.Fatal(err)
		}
		g := wire.GrantFrom(f.get(shared).GetAnnotations())
		if acquired != "" && (rec.MachineName != acquired || g.MachineName != acquired || rec.Token != g.Token) {
			t.Errorf("round %d: %s acquired, but the lock names %s and the register %s", i, acquired, rec.MachineName, g.Raw())
		}
	}
}
