//go:build real

package real_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/initlock/initlock/internal/kubeenv"
	"github.com/initlock/initlock/internal/kubeenv/stack"
	"github.com/initlock/initlock/internal/kubeenv/wire"
)

// TestUninstall: with initlock-manager down and its lock guard still
// installed, nothing keeps a namespace or a Cluster from deletion; then
// the guard is uninstalled (its binding, then its policy) with the manager
// still down, and no lock is left stuck: unmodified Cluster API releases
// each as it would without initlock. Three Clusters, each with cp-0
// holding its lock (init data generated, control plane not initialised):
// the namespace of the first is deleted; the second Cluster is deleted (its
// lock stays, the garbage collector's delete refused); the third loses cp-0
// and gains cp-1, which CABPK makes wait (its release of the lock naming a
// gone Machine is refused). Once the guard is gone, the garbage collector
// deletes the second lock and CABPK hands the third to cp-1.
func TestUninstall(t *testing.T) {
	ctx := t.Context()
	startManager(t, source)
	const cluster, cp0, cp1 = "un", "un-cp-0", "un-cp-1"
	var nsDel, clDel, cpDel string
	var wg sync.WaitGroup
	errs := make([]error, 3)
	for i, ns := range []*string{&nsDel, &clDel, &cpDel} {
		*ns = source.Env.Namespace(t)
		wg.Go(func() { _, errs[i] = createHeld(ctx, source, *ns, cluster, cp0, hasInitData(source, *ns, cp0)) })
	}
	wg.Wait()
	must(t, errors.Join(errs...))

	// The manager is down: its Deployment deleted or scaled to zero.
	source.StopManager()
	start := time.Now()
	must(t, source.DeleteNamespace(ctx, nsDel))
	nsGone := time.Since(start)
	start = time.Now()
	must(t, source.DeleteCluster(ctx, clDel, cluster))
	clusterGone := time.Since(start)
	m, err := source.Get(ctx, stack.MachineGVK, cpDel, cp0)
	must(t, err)
	must(t, source.Client.Delete(ctx, m))
	eventually(t, time.Minute, machineGone(source, cpDel, cp0))
	if granted, _ := addSecondMachine(t, source, cpDel, cluster, cp1); granted {
		t.Fatalf("%s got init data while the lock named %s", cp1, cp0)
	}
	for _, ns := range []string{clDel, cpDel} {
		cm, err := kubeenv.GetLock(ctx, source.Client, ns, cluster)
		must(t, err)
		if cm == nil || cm.DeletionTimestamp != nil {
			t.Fatalf("with the manager down and the guard installed, the lock of %s/%s is %v; want it there, not terminating", ns, cluster, cm)
		}
	}
	if err := hasInitData(source, cpDel, cp1)(ctx); err == nil {
		t.Fatalf("%s got init data while the lock named %s", cp1, cp0)
	}
	refusedGC := guardRefusals(t, source, userGC, clDel, cluster+wire.LockSuffix)
	refusedCABPK := guardRefusals(t, source, userCABPK, cpDel, cluster+wire.LockSuffix)

	// Uninstall the guard: its binding, then its policy.
	start = time.Now()
	must(t, source.RemoveLockGuard(ctx))
	removed := time.Since(start)
	start = time.Now()
	var lockCollected, handedOver time.Duration
	eventually(t, 5*time.Minute, func(ctx context.Context) error {
		if lockCollected == 0 && kubeenv.LockGone(ctx, source.Client, clDel, cluster)() == nil {
			lockCollected = time.Since(start)
		}
		if handedOver == 0 && hasInitData(source, cpDel, cp1)(ctx) == nil {
			handedOver = time.Since(start)
		}
		if lockCollected == 0 || handedOver == 0 {
			return errors.New("a lock is still held")
		}
		return nil
	})
	result(t, "uninstall: with initlock-manager down and its guard installed, a namespace holding a held lock was deleted in %s, a Cluster with a held lock in %s "+
		"(its lock stayed: the garbage collector's deletes refused %d times), CABPK's release of a gone holder's lock refused %d times while cp-1 waited; "+
		"the guard's binding and policy removed in %s; then the garbage collector deleted the deleted Cluster's lock %s later, and CABPK gave cp-1 init data %s later",
		nsGone.Round(time.Millisecond), clusterGone.Round(time.Millisecond), refusedGC, refusedCABPK, removed.Round(time.Millisecond),
		lockCollected.Round(time.Millisecond), handedOver.Round(time.Millisecond))
}
