package chaos

import (
	"context"
	"fmt"
	"strconv"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/initlock/initlock/internal/kubeenv"
)

// startCache starts the informer cache of Clusters and Machines that the
// bootstrap controllers read stale views from, as a provider built on
// controller-runtime reads the objects it reconciles. Its watches go
// through an Injector that delays their events by the plan's CacheLag, so
// that it lags behind the server. It runs until ctx ends.
func (r *runner) startCache(ctx context.Context) error {
	cfg, inj := WrapConfig(r.o.Config, "cache", r.p.Seed*31+7, nil)
	inj.SetFaults(Faults{WatchLag: r.p.CacheLag})
	r.cacheFaults = inj
	ca, err := cache.New(cfg, cache.Options{Scheme: kubeenv.Scheme(), Mapper: r.admin.RESTMapper(),
		DefaultNamespaces: map[string]cache.Config{r.ns: {}}})
	if err != nil {
		return fmt.Errorf("building the bootstrap controllers' cache: %w", err)
	}
	for _, obj := range []client.Object{r.clusterObject(""), r.machineObject("")} {
		if _, err := ca.GetInformer(ctx, obj); err != nil {
			return fmt.Errorf("informer for %s: %w", obj.GetObjectKind().GroupVersionKind().Kind, err)
		}
	}
	go func() {
		if err := ca.Start(ctx); err != nil {
			r.fail(fmt.Errorf("the bootstrap controllers' cache: %w", err))
		}
	}()
	if !ca.WaitForCacheSync(ctx) {
		return fmt.Errorf("the bootstrap controllers' cache did not sync: %w", ctx.Err())
	}
	r.cache = ca
	r.h.Addf("driver", "cache synced", r.ns, "clusters and machines, events delayed by %s", r.p.CacheLag)
	return nil
}

// revision is an object's resourceVersion as a number, 0 if it is not one.
func revision(u *unstructured.Unstructured) int64 {
	n, _ := strconv.ParseInt(u.GetResourceVersion(), 10, 64)
	return n
}
