//go:build real

package real_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/initlock/initlock/internal/kubeenv"
	"github.com/initlock/initlock/internal/kubeenv/stack"
	"github.com/initlock/initlock/internal/kubeenv/wire"
)

// conflicts lists the writes of CABPK and initlock-manager to a Cluster and
// its lock that clash with the other's: a write refused with 409 Conflict
// or a delete answered 404 right after the other one's successful write to
// the object, and a lock created again after the other one released it. A
// 409 between initlock-manager's own controllers (the lock controller and
// the relinker both patch a restored lock) is not a clash with CABPK. It
// also counts the writes to the lock by user and verb.
func conflicts(ws []stack.Write, ns, cluster string) (clashes []string, lockWrites map[string]int) {
	lockWrites = map[string]int{}
	last := map[string]stack.Write{}
	for _, w := range ws {
		if w.Namespace != ns || (w.User != userCABPK && w.User != userManager) {
			continue
		}
		isLock := w.Resource == "configmaps" && w.Name == cluster+wire.LockSuffix
		isCluster := w.Resource == "clusters" && w.Name == cluster
		if !isLock && !isCluster {
			continue
		}
		obj := w.Resource + "/" + w.Name
		if isLock {
			lockWrites[w.User+" "+w.Verb]++
		}
		prev, seen := last[obj]
		other := seen && prev.User != w.User
		clash := fmt.Sprintf("%s %s %s %d after %s %s", w.User, w.Verb, obj, w.Code, prev.User, prev.Verb)
		switch {
		case other && (w.Code == 409 || (w.Verb == "delete" && w.Code == 404)):
			clashes = append(clashes, clash)
		case other && isLock && w.Verb == "create" && w.Code < 300 && prev.Verb == "delete":
			clashes = append(clashes, clash)
		}
		if w.Code < 300 {
			last[obj] = w
		}
	}
	return clashes, lockWrites
}

// TestJoinAfterRestore: a single control-plane Cluster, initialised, is
// backed up and restored into the second management cluster, where
// initlock-manager runs with its lock guard and default flags. Once core
// reports the restored control plane initialised, the manager releases the
// lock (the release mark, then the delete). A worker Machine added then
// gets its join data from CABPK, whose own release on its join path finds
// no lock; initlock does not fight it: no conflicting write between CABPK
// and initlock-manager over the whole run, and no delete of CABPK's
// refused.
func TestJoinAfterRestore(t *testing.T) {
	ctx := t.Context()
	ns := source.Env.Namespace(t)
	const cluster, cp, worker = "join", "join-cp-0", "join-md-0"
	cleanupNode(t, source, ns, cp)
	must(t, source.CreateCluster(ctx, ns, cluster, stack.ClusterOptions{Workload: true}))
	must(t, source.CreateMachine(ctx, ns, cluster, cp, true))
	must(t, source.RegisterNode(ctx, ns, cp))
	waitLockHeld(t, source, ns, cluster, cp)
	waitInitialized(t, source, ns, cluster)
	setPaused(t, source, ns, cluster, true)
	v := startVelero(t, source, true)
	backup := backupNamespace(t, v, ns)
	source.StopVelero()

	// The restore, into the second management cluster; the workload
	// cluster (and the Node) stay where they are.
	start := time.Now()
	mapped := kubeenv.NamespaceName("join-restored")
	cleanupNamespace(t, target, mapped)
	startManager(t, target)
	v = startVelero(t, target, true)
	must(t, v.WaitBackupSynced(ctx, backup))
	_, restored := restoreBackup(t, v, backup, "--namespace-mappings", ns+":"+mapped)
	target.StopVelero()
	markProvisioned(t, target, mapped, cluster, cp)
	must(t, target.SetPaused(ctx, mapped, cluster, false))
	waitInitialized(t, target, mapped, cluster)
	eventually(t, 60*time.Second, lockGone(target, mapped, cluster))
	releasedAfterInit := time.Since(restored)

	// A worker joins.
	joinStart := time.Now()
	must(t, target.CreateMachine(ctx, mapped, cluster, worker, false))
	var joinData time.Duration
	eventually(t, 2*time.Minute, func(ctx context.Context) error {
		kc, err := target.Get(ctx, stack.KubeadmConfigGVK, mapped, worker)
		if err != nil {
			return err
		}
		if kc == nil {
			return errors.New("no kubeadmconfig")
		}
		if name, _, _ := unstructured.NestedString(kc.Object, "status", "dataSecretName"); name == "" {
			return errors.New("the worker has no join data yet")
		}
		joinData = time.Since(joinStart)
		return nil
	})
	// Nothing writes the lock again.
	kubeenv.Consistently(t, 3*time.Second, func() error {
		cm, err := kubeenv.GetLock(ctx, target.Client, mapped, cluster)
		if err != nil {
			return err
		}
		if cm != nil {
			return fmt.Errorf("the lock is back: %v", cm.Data)
		}
		return nil
	})
	run := auditWrites(t, target, func(w stack.Write) bool { return !w.At.Before(start) })
	clashes, lockWrites := conflicts(run, mapped, cluster)
	if len(clashes) != 0 {
		t.Errorf("%d conflicting writes between CABPK and initlock-manager: %v; writes to the lock: %v", len(clashes), clashes, lockWrites)
	}
	refused := guardRefusals(t, target, userCABPK, mapped, cluster+wire.LockSuffix)
	if refused != 0 {
		t.Errorf("CABPK's deletes of the lock refused: %d; want none: the manager releases the lock at init, before CABPK's join path", refused)
	}
	managerWrites := writesBy(t, target, userManager, mapped, start)
	result(t, "scenario 4, join after restore: initlock-manager released the lock %s after the restore, once the control plane was initialised; the worker's join data came %s after it was created; "+
		"writes to the lock: %v; initlock-manager's writes: %d (%s); conflicting writes between CABPK and initlock-manager: %d; CABPK's deletes refused: %d",
		releasedAfterInit.Round(time.Millisecond), joinData.Round(time.Millisecond), lockWrites,
		len(managerWrites), describeWrites(managerWrites), len(clashes), refused)
}
