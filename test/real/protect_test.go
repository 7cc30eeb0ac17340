//go:build real

package real_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/uuid"
	"k8s.io/cli-runtime/pkg/genericiooptions"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/initlock/initlock/internal/cli"
	"github.com/initlock/initlock/internal/kubeenv"
	"github.com/initlock/initlock/internal/kubeenv/stack"
	"github.com/initlock/initlock/pkg/initlock/engine"
)

// heldOutcome is what a delete of a held lock came to.
type heldOutcome struct {
	mode string
	// window is the time from CABPK's create of the lock to the manager's
	// patch that put the finalizer on it, from the audit log.
	window time.Duration
	// afterDelete tells what became of the lock 2 s after the delete.
	afterDelete string
	// secondInit tells whether the second control-plane Machine got init
	// data while the first existed.
	secondInit, firstExisted bool
	initAfter                time.Duration
	lockHolder               string
	heldBack                 int
}

func (o heldOutcome) String() string {
	s := o.mode + ": "
	if o.window > 0 {
		s += fmt.Sprintf("lock protected %s after CABPK created it; ", o.window.Round(time.Millisecond))
	}
	s += "after the delete the lock " + o.afterDelete + "; "
	if o.secondInit {
		s += fmt.Sprintf("cp-1 got init data %s after it was created, while cp-0 existed: %t", o.initAfter.Round(time.Millisecond), o.firstExisted)
	} else {
		s += fmt.Sprintf("cp-1 got no init data within %s", secondInitWait)
	}
	s += fmt.Sprintf("; lock holder at the end: %q", o.lockHolder)
	if o.mode != "upstream" {
		s += fmt.Sprintf("; LockDeleteHeldBack events: %d", o.heldBack)
	}
	return s
}

// deleteHow deletes cluster's held lock in namespace ns, one way.
type deleteHow func(t *testing.T, ns, cluster string) error

// operatorDelete is `kubectl delete configmap <cluster>-lock`.
func operatorDelete(t *testing.T, ns, cluster string) error {
	cm := &corev1.ConfigMap{}
	cm.Namespace, cm.Name = ns, cluster+"-lock"
	return source.Client.Delete(t.Context(), cm)
}

// staleOwner leaves the lock owned by a Cluster UID that no longer exists,
// as a restore or a copy from an earlier incarnation of the Cluster does;
// the garbage collector then deletes it.
func staleOwner(t *testing.T, ns, cluster string) error {
	ctx := t.Context()
	cm, err := kubeenv.GetLock(ctx, source.Client, ns, cluster)
	if err != nil {
		return err
	}
	if cm == nil || len(cm.OwnerReferences) != 1 {
		return fmt.Errorf("lock of %s/%s: want one ownerReference, got %v", ns, cluster, cm)
	}
	next := cm.DeepCopy()
	next.OwnerReferences[0].UID = uuid.NewUUID()
	return source.Client.Patch(ctx, next, client.MergeFromWithOptions(cm, client.MergeFromWithOptimisticLock{}))
}

// staleOwnerManagerDown is staleOwner while initlock-manager is down (it
// would re-adopt the lock before the garbage collector acts): the
// collector deletes the lock, and only the finalizer holds it. The manager
// is started again 2 s later.
func staleOwnerManagerDown(t *testing.T, ns, cluster string) error {
	if !source.ManagerRuns() {
		return staleOwner(t, ns, cluster)
	}
	source.StopManager()
	if err := staleOwner(t, ns, cluster); err != nil {
		return err
	}
	time.Sleep(2 * time.Second)
	startManager(t, source)
	return nil
}

// runHeldDelete: CABPK takes the lock for cp-0 and generates its init data
// (cp-0 is initialising: nothing marks the control plane initialised); the
// lock is deleted by del; then a second control-plane Machine cp-1 is
// added.
func runHeldDelete(t *testing.T, withManager bool, del deleteHow) heldOutcome {
	ctx := t.Context()
	o := heldOutcome{mode: "upstream"}
	ns := source.Env.Namespace(t)
	start := time.Now()
	if withManager {
		o.mode = "with initlock-manager"
		startManager(t, source)
		defer source.StopManager()
	}
	const cluster, cp0, cp1 = "held", "held-cp-0", "held-cp-1"
	must(t, source.CreateCluster(ctx, ns, cluster, stack.ClusterOptions{}))
	must(t, source.CreateMachine(ctx, ns, cluster, cp0, true))
	waitLockHeld(t, source, ns, cluster, cp0)
	waitInitData(t, source, ns, cp0)
	if withManager {
		eventually(t, 10*time.Second, func(ctx context.Context) error {
			cm, err := kubeenv.GetLock(ctx, source.Client, ns, cluster)
			if err != nil || cm == nil || !hasHeldFinalizer(cm) {
				return fmt.Errorf("lock not protected yet (%w)", err)
			}
			return nil
		})
		o.window = protectionWindow(t, ns, cluster+"-lock", start)
	}

	must(t, del(t, ns, cluster))
	time.Sleep(2 * time.Second)
	cm, err := kubeenv.GetLock(ctx, source.Client, ns, cluster)
	must(t, err)
	switch {
	case cm == nil:
		o.afterDelete = "was gone"
	case cm.DeletionTimestamp != nil:
		o.afterDelete = "was held back, terminating"
	default:
		o.afterDelete = "was there, not terminating"
	}

	created := time.Now()
	must(t, source.CreateMachine(ctx, ns, cluster, cp1, true))
	if err := stack.Poll(ctx, secondInitWait, hasInitData(source, ns, cp1)); err == nil {
		o.secondInit, o.initAfter = true, time.Since(created)
		m, err := source.Get(ctx, stack.MachineGVK, ns, cp0)
		must(t, err)
		o.firstExisted = m != nil
	}
	cm, err = kubeenv.GetLock(ctx, source.Client, ns, cluster)
	must(t, err)
	if cm != nil {
		rec, _ := engine.DecodeRecord(cm.Data[engine.DataKey])
		o.lockHolder = rec.MachineName
	}
	o.heldBack = countEvents(t, ns, "LockDeleteHeldBack")
	if withManager {
		managerDown(t, ns, cluster)
	}
	return o
}

// managerDown: with the manager stopped, the Cluster (and with it its
// Machines) is deleted; the protected lock stays terminating, and the
// command docs/install.md gives clears it.
func managerDown(t *testing.T, ns, cluster string) {
	ctx := t.Context()
	source.StopManager()
	deleteCluster(t, source, ns, cluster)
	time.Sleep(2 * time.Second)
	cm, err := kubeenv.GetLock(ctx, source.Client, ns, cluster)
	must(t, err)
	if cm == nil || !hasHeldFinalizer(cm) {
		t.Fatalf("with the manager down, the protected lock of the deleted Cluster %s/%s: want it terminating with %s, got %v", ns, cluster, engine.HeldFinalizer, cm)
	}
	kubeconfig, err := source.Env.WriteKubeconfig("operator", []string{"system:masters"})
	must(t, err)
	var out, errOut bytes.Buffer
	args := []string{"release", cluster, "-n", ns, "--force", "--yes", "--kubeconfig", kubeconfig}
	t.Logf("$ kubectl initlock %s", strings.Join(args[:len(args)-2], " "))
	code := cli.Execute(ctx, cli.Options{IOStreams: genericiooptions.IOStreams{Out: &out, ErrOut: &errOut}}, args)
	t.Logf("%s%s", out.String(), errOut.String())
	if code != cli.ExitOK {
		t.Fatalf("kubectl initlock release --force: exit code %d", code)
	}
	eventually(t, 10*time.Second, func(ctx context.Context) error {
		return kubeenv.LockGone(ctx, source.Client, ns, cluster)()
	})
	result(t, "manager down: the protected lock of a deleted Cluster stayed terminating; 'kubectl initlock release %s -n <ns> --force' cleared it", cluster)
}

func hasHeldFinalizer(cm *corev1.ConfigMap) bool {
	for _, f := range cm.Finalizers {
		if f == engine.HeldFinalizer {
			return true
		}
	}
	return false
}

// protectionWindow is the time from the first create of lock name to the
// manager's first patch of it, from the audit log.
func protectionWindow(t *testing.T, ns, name string, since time.Time) time.Duration {
	t.Helper()
	all, err := source.Writes()
	must(t, err)
	var created time.Time
	for _, w := range all {
		if w.Namespace != ns || w.Resource != "configmaps" || w.Name != name || w.At.Before(since) {
			continue
		}
		if w.Verb == "create" && w.User == userCABPK && w.Code == 201 && created.IsZero() {
			created = w.At
		}
		if w.Verb == "patch" && w.User == userManager && w.Code == 200 && !created.IsZero() {
			return w.At.Sub(created)
		}
	}
	t.Fatalf("no create by CABPK followed by a patch by the manager of configmap %s/%s in the audit log", ns, name)
	return 0
}

// countEvents counts the events of reason in namespace ns (the manager
// reports a lock's events on its Cluster, or on the lock without one).
func countEvents(t *testing.T, ns, reason string) int {
	t.Helper()
	var l corev1.EventList
	must(t, source.Client.List(t.Context(), &l, client.InNamespace(ns)))
	n := 0
	for _, e := range l.Items {
		if e.Reason == reason {
			n += max(int(e.Count), 1)
		}
	}
	return n
}

// TestHeldLockDeleted: a held lock deleted while its holder cp-0 is still
// initialising, by an operator and by the garbage collector (a stale owner
// UID), with CABPK unmodified: upstream alone lets cp-1 run init as well;
// with initlock-manager the delete is held back until cp-0 is done.
func TestHeldLockDeleted(t *testing.T) {
	for _, tc := range []struct {
		name string
		del  deleteHow
	}{
		{"operator deletes the lock", operatorDelete},
		{"lock owned by a stale Cluster UID, collected", staleOwner},
		{"lock owned by a stale Cluster UID while the manager is down", staleOwnerManagerDown},
	} {
		t.Run(tc.name, func(t *testing.T) {
			up := runHeldDelete(t, false, tc.del)
			with := runHeldDelete(t, true, tc.del)
			result(t, "held lock deleted (%s): %s; %s", tc.name, up, with)
			if with.secondInit {
				t.Errorf("with initlock-manager, cp-1 got init data while cp-0 existed: %s", with)
			}
			if with.lockHolder != "held-cp-0" || with.heldBack == 0 && with.afterDelete != "was there, not terminating" {
				t.Errorf("with initlock-manager, want the lock kept for held-cp-0: %s", with)
			}
		})
	}
}

// failedOutcome is what a failed generation of the init data came to.
type failedOutcome struct {
	mode string
	// dataAfter is the time from the missing Secret's creation to cp-0's
	// init data; 0 when it got none.
	dataAfter time.Duration
	events    map[string]int
}

func (o failedOutcome) String() string {
	s := o.mode + ": "
	if o.dataAfter > 0 {
		s += fmt.Sprintf("cp-0 got its init data %s after the Secret was created", o.dataAfter.Round(time.Millisecond))
	} else {
		s += fmt.Sprintf("cp-0 got no init data within %s of the Secret's creation", failedInitWait)
	}
	if o.mode != "upstream" {
		s += fmt.Sprintf("; events %v", o.events)
	}
	return s
}

// failedInitWait bounds the wait for cp-0's init data once the Secret its
// KubeadmConfig needs exists: the failed-init settle (10 s here), CABPK's
// 30 s requeue of a lock not acquired, and its error backoff.
const failedInitWait = 3 * time.Minute

// runFailedInit: cp-0's KubeadmConfig names a file from a Secret that does
// not exist, so CABPK takes the lock, fails to generate the init data and
// releases it (its Unlock deletes the lock), again and again; after 30 s
// the Secret is created. With the manager protecting the lock, CABPK's
// Unlock is held back while cp-0 exists: the manager must tell the failure
// apart and let the lock go, or cp-0 would never get its init data.
func runFailedInit(t *testing.T, withManager bool) failedOutcome {
	ctx := t.Context()
	o := failedOutcome{mode: "upstream"}
	ns := source.Env.Namespace(t)
	if withManager {
		o.mode = "with initlock-manager --failed-init-settle=10s"
		startManager(t, source, "--failed-init-settle=10s")
		defer source.StopManager()
	}
	const cluster, cp0, secret = "failed", "failed-cp-0", "failed-files"
	must(t, source.CreateCluster(ctx, ns, cluster, stack.ClusterOptions{}))
	must(t, source.CreateMachineWithConfig(ctx, ns, cluster, cp0, true, map[string]any{
		"files": []any{map[string]any{
			"path":        "/etc/initlock-test",
			"contentFrom": map[string]any{"secret": map[string]any{"name": secret, "key": "value"}},
		}},
	}))
	eventually(t, 60*time.Second, func(ctx context.Context) error {
		kc, err := source.Get(ctx, stack.KubeadmConfigGVK, ns, cp0)
		if err != nil || kc == nil {
			return fmt.Errorf("no KubeadmConfig (%w)", err)
		}
		if !strings.Contains(fmt.Sprint(kc.Object["status"]), "DataSecretGenerationFailed") {
			return errors.New("CABPK has not reported the failure yet")
		}
		return nil
	})
	time.Sleep(30 * time.Second)
	must(t, source.Client.Create(ctx, &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: secret},
		Data:       map[string][]byte{"value": []byte("initlock")},
	}))
	created := time.Now()
	if err := stack.Poll(ctx, failedInitWait, hasInitData(source, ns, cp0)); err == nil {
		o.dataAfter = time.Since(created)
	}
	o.events = map[string]int{}
	for _, r := range []string{"LockProtected", "LockDeleteHeldBack", "LockDisarmed", "LockUnprotected", "LockRearmed"} {
		o.events[r] = countEvents(t, ns, r)
	}
	return o
}

// TestFailedInitReleased: CABPK's own release of the lock after a failed
// generation of the init data does not leave a protected lock stuck.
func TestFailedInitReleased(t *testing.T) {
	up := runFailedInit(t, false)
	with := runFailedInit(t, true)
	result(t, "failed init data, then fixed: %s; %s", up, with)
	if with.dataAfter == 0 {
		t.Errorf("with initlock-manager, cp-0 is stuck: %s", with)
	}
}
