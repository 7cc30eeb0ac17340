//go:build real

package real_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/initlock/initlock/internal/kubeenv"
	"github.com/initlock/initlock/internal/kubeenv/stack"
	"github.com/initlock/initlock/internal/kubeenv/wire"
)

// waitInitialized waits until core reports the Cluster's control plane
// initialised and returns how long that took.
func waitInitialized(t *testing.T, m *stack.Mgmt, ns, cluster string) time.Duration {
	t.Helper()
	start := time.Now()
	must(t, m.WaitCondition(t.Context(), ns, cluster, kubeenv.InitializedCondition))
	return time.Since(start)
}

// writesTo returns the writes to the ConfigMap name in ns, from the audit
// log, as "user verb".
func writesTo(t *testing.T, m *stack.Mgmt, ns, name string) []stack.Write {
	t.Helper()
	ws := auditWrites(t, m, func(w stack.Write) bool { return w.Namespace == ns && w.Resource == "configmaps" && w.Name == name })
	for i := range ws {
		ws[i].Resource = ws[i].User
	}
	return ws
}

// cleanupNode deletes a Machine's Node when t ends.
func cleanupNode(t *testing.T, m *stack.Mgmt, ns, machine string) {
	t.Cleanup(func() {
		_ = m.Client.Delete(context.WithoutCancel(t.Context()), &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: stack.NodeName(ns, machine)}})
	})
}

// TestSingleControlPlane: a Cluster with one control-plane Machine goes the
// whole init path on the real components (its Node registers in the
// workload cluster, which is the management cluster's own API server; core
// sets the nodeRef and reports the control plane initialised). Upstream
// keeps the lock; once initlock-manager runs (with its lock guard), it
// releases it: the release mark, then the delete.
func TestSingleControlPlane(t *testing.T) {
	ctx := t.Context()
	ns := source.Env.Namespace(t)
	const cluster, machine = "solo", "solo-cp-0"
	cleanupNode(t, source, ns, machine)
	must(t, source.CreateCluster(ctx, ns, cluster, stack.ClusterOptions{Workload: true}))
	created := time.Now()
	must(t, source.CreateMachine(ctx, ns, cluster, machine, true))
	waitLockHeld(t, source, ns, cluster, machine)
	locked := time.Since(created)
	must(t, source.RegisterNode(ctx, ns, machine))
	initialised := waitInitialized(t, source, ns, cluster)

	// Upstream releases the lock only on the join path: nothing joins.
	const held = 5 * time.Second
	kubeenv.Consistently(t, held, func() error {
		cm, err := kubeenv.GetLock(ctx, source.Client, ns, cluster)
		if err != nil {
			return err
		}
		if cm == nil {
			return fmt.Errorf("the lock was released without initlock (%s): upstream releases after init now",
				describeWrites(writesTo(t, source, ns, cluster+wire.LockSuffix)))
		}
		return nil
	})

	started := time.Now()
	installManager(t, source, stack.ManagerOptions{})
	eventually(t, 60*time.Second, lockGone(source, ns, cluster))
	released := time.Since(started)
	writes := writesBy(t, source, userManager, ns, started)
	result(t, "scenario 3, single control plane: CABPK took the lock %s after the Machine was created, core reported the control plane initialised %s later; "+
		"upstream still held the lock %s after init; initlock-manager released it %s after it started, with %d writes (%s)",
		locked.Round(time.Millisecond), initialised.Round(time.Millisecond), held, released.Round(time.Millisecond), len(writes), describeWrites(writes))
}
