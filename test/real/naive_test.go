//go:build real

package real_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/initlock/initlock/internal/kubeenv"
	"github.com/initlock/initlock/internal/kubeenv/stack"
	"github.com/initlock/initlock/internal/kubeenv/velerosim"
	"github.com/initlock/initlock/pkg/initlock/engine"
)

// secondInitWait is how long the second control-plane Machine is watched
// for init data.
const secondInitWait = 30 * time.Second

// naiveOutcome is what a naive copy of a backup came to.
type naiveOutcome struct {
	mode string
	// collected are the restored objects the garbage collector deleted,
	// with when, after the restore.
	collected []string
	// secondInit tells whether the second control-plane Machine got init
	// data, and firstExisted whether the first Machine existed then.
	secondInit, firstExisted bool
	initAfter                time.Duration
	lockHolder               string
	managerWrites            []stack.Write
}

func (o naiveOutcome) String() string {
	s := fmt.Sprintf("%s: the garbage collector deleted %d restored objects (%s); ", o.mode, len(o.collected), strings.Join(o.collected, " "))
	if o.secondInit {
		s += fmt.Sprintf("cp-1 got init data %s after it was created, while cp-0 existed: %t", o.initAfter.Round(time.Millisecond), o.firstExisted)
	} else {
		s += fmt.Sprintf("cp-1 got no init data within %s", secondInitWait)
	}
	s += fmt.Sprintf("; lock holder at the end: %q", o.lockHolder)
	if o.mode != "upstream" {
		s += fmt.Sprintf("; initlock-manager's writes: %d (%s)", len(o.managerWrites), describeWrites(o.managerWrites))
	}
	return s
}

// runNaive: CABPK takes the lock for cp-0 and generates its init data; the
// namespace is copied naively (objects re-created as backed up, keeping
// their ownerReferences with the old owners' UIDs), after the namespace was
// lost; then a second control-plane Machine cp-1 is added.
func runNaive(t *testing.T, withManager bool) naiveOutcome {
	ctx := t.Context()
	o := naiveOutcome{mode: "upstream"}
	if withManager {
		o.mode = "with initlock-manager"
	}
	ns := source.Env.Namespace(t)
	const cluster, cp0, cp1 = "naive", "naive-cp-0", "naive-cp-1"
	must(t, source.CreateCluster(ctx, ns, cluster, stack.ClusterOptions{}))
	must(t, source.CreateMachine(ctx, ns, cluster, cp0, true))
	waitLockHeld(t, source, ns, cluster, cp0)
	waitInitData(t, source, ns, cp0)
	backed := snapshot(t, source, ns)

	deleteNamespace(t, source, ns)
	must(t, source.Client.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}))
	start := time.Now()
	if withManager {
		_, err := source.StartManager(ctx)
		must(t, err)
		defer source.StopManager()
	}
	r, err := velerosim.New(source.Env.Config, velerosim.Options{Naive: true})
	must(t, err)
	restored, err := r.Restore(ctx, backed)
	must(t, err)
	restoredAt := time.Now()

	// Watch the restored objects for 5 s.
	gone := map[string]time.Duration{}
	for time.Since(restoredAt) < 5*time.Second {
		for _, u := range restored {
			if _, ok := gone[key(u)]; ok {
				continue
			}
			cur, err := source.Get(ctx, u.GroupVersionKind(), ns, u.GetName())
			must(t, err)
			if cur == nil || cur.GetUID() != u.GetUID() {
				gone[key(u)] = time.Since(restoredAt)
			}
		}
		time.Sleep(20 * time.Millisecond)
	}
	for k, d := range gone {
		o.collected = append(o.collected, fmt.Sprintf("%s@%s", k, d.Round(time.Millisecond)))
	}
	slices.Sort(o.collected)

	// A second control-plane Machine.
	created := time.Now()
	must(t, source.CreateMachine(ctx, ns, cluster, cp1, true))
	err = stack.Poll(ctx, secondInitWait, hasInitData(source, ns, cp1))
	if err == nil {
		o.secondInit, o.initAfter = true, time.Since(created)
		m, err := source.Get(ctx, stack.MachineGVK, ns, cp0)
		must(t, err)
		o.firstExisted = m != nil
	}
	cm, err := kubeenv.GetLock(ctx, source.Client, ns, cluster)
	must(t, err)
	if cm != nil {
		rec, _ := engine.DecodeRecord(cm.Data[engine.DataKey])
		o.lockHolder = rec.MachineName
	}
	o.managerWrites = writesBy(t, source, userManager, ns, start)
	return o
}

// hasInitData returns a check that CABPK has written machine's init data
// (kubeadm init) in m.
func hasInitData(m *stack.Mgmt, ns, machine string) func(context.Context) error {
	return func(ctx context.Context) error {
		data, err := m.BootstrapData(ctx, ns, machine)
		if err != nil {
			return err
		}
		if !strings.Contains(data, "kubeadm init") {
			return errors.New("no init data yet")
		}
		return nil
	}
}

// waitInitData waits until CABPK has written a Machine's bootstrap data.
func waitInitData(t *testing.T, m *stack.Mgmt, ns, machine string) {
	t.Helper()
	eventually(t, 60*time.Second, hasInitData(m, ns, machine))
}

// TestNaiveRestore measures a restore that keeps stale owner UIDs, with
// CABPK unmodified: with upstream alone, and with initlock-manager running.
// The manager cannot fence an unmodified provider; this is the baseline
// for that work. It asserts only that the measurement ran.
func TestNaiveRestore(t *testing.T) {
	up := runNaive(t, false)
	with := runNaive(t, true)
	result(t, "scenario 5, naive copy keeping stale owner UIDs: %s; %s", up, with)
}
