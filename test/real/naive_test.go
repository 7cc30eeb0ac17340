//go:build real

package real_test

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/initlock/initlock/internal/kubeenv"
	"github.com/initlock/initlock/internal/kubeenv/stack"
	"github.com/initlock/initlock/internal/kubeenv/velerosim"
	"github.com/initlock/initlock/internal/kubeenv/wire"
)

// naiveRuns is how many naive copies each variant of TestNaiveRestore makes.
const naiveRuns = 20

// naiveCluster is the Cluster of every run, each in its own namespace.
const naiveCluster, naiveCP0, naiveCP1 = "naive", "naive-cp-0", "naive-cp-1"

// naiveRun is what one naive copy came to.
type naiveRun struct {
	// lockGone is when the copied lock went, after the copy; 0 when it
	// stayed.
	lockGone time.Duration
	// gcRefused counts the garbage collector's deletes of the copied lock
	// that the API server refused.
	gcRefused int
	// secondInit tells whether cp-1 got init data, and firstExisted
	// whether cp-0 existed then.
	secondInit, firstExisted bool
	lockHolder               string
}

// violated tells whether a second Machine was granted while the first
// existed.
func (r naiveRun) violated() bool { return r.secondInit && r.firstExisted }

// naiveVariant is how initlock is installed for a run of naive copies.
type naiveVariant struct {
	name string
	// install starts initlock; before the backups when early.
	install func(t *testing.T)
	early   bool
}

// TestNaiveRestore: CABPK, unmodified, takes the lock for cp-0 and
// generates its init data; right then the namespace is backed up and
// copied into a new namespace, the lock as "kubectl get -o yaml | kubectl
// apply" copies it, keeping its ownerReference to the old Cluster's UID.
// The rest of the graph is copied without ownerReferences, as Velero
// restores it, and core adopts it again: copied with the old UIDs too, the
// garbage collector would delete the LocalCluster, the Machines and their
// KubeadmConfigs before core could adopt them (core adopts a Machine only
// when it names no Cluster at all), and no Machine would be left to
// compare. The infrastructure provider reports its copied objects
// provisioned, and a second control-plane Machine cp-1 is added to the
// copy. The copy creates the lock before its Cluster (Velero's order), so
// the garbage collector finds the lock's owner missing at once. naiveRuns
// copies are made with initlock-manager (default flags) and its lock guard
// installed throughout: in none is cp-1 granted while cp-0 exists. Then as
// many with the manager alone, started after the backups (the protection
// that reacts to the lock once it exists): upstream's failure must show in
// at least one (cp-1 runs init next to cp-0). With
// $INITLOCK_BASELINE_MANAGER an earlier build is measured the same way, and
// only reported.
func TestNaiveRestore(t *testing.T) {
	variants := []naiveVariant{
		{name: "initlock-manager with the lock guard", early: true, install: func(t *testing.T) {
			installManager(t, source, stack.ManagerOptions{})
		}},
		{name: "initlock-manager without the lock guard", install: func(t *testing.T) {
			installManager(t, source, stack.ManagerOptions{NoLockGuard: true})
		}},
	}
	if opts, ok := baseline(); ok {
		variants = append(variants, naiveVariant{name: strings.TrimSpace("baseline " + filepath.Base(opts.Binary) + " " + strings.Join(opts.Args, " ")), install: func(t *testing.T) {
			installManager(t, source, opts)
		}})
	}
	for i, v := range variants {
		t.Run(strings.ReplaceAll(v.name, "/", "_"), func(t *testing.T) {
			start := time.Now()
			runs := runNaive(t, v)
			violations, gone, refused := 0, 0, 0
			var goneAt []string
			for _, r := range runs {
				if r.violated() {
					violations++
				}
				if r.lockGone > 0 {
					gone++
					goneAt = append(goneAt, r.lockGone.Round(time.Millisecond).String())
				}
				refused += r.gcRefused
			}
			wentAt := ""
			if gone > 0 {
				wentAt = " (" + strings.Join(goneAt, " ") + " after the copy)"
			}
			result(t, "scenario 5, naive copy keeping stale owner UIDs, %s: cp-1 granted while cp-0 existed in %d of %d runs; "+
				"the copied lock went in %d runs%s; the garbage collector's deletes of the lock refused: %d; %d runs in %s",
				v.name, violations, len(runs), gone, wentAt, refused, len(runs), time.Since(start).Round(time.Second))
			switch i {
			case 0:
				if violations != 0 {
					t.Errorf("with the lock guard, cp-1 was granted while cp-0 existed in %d of %d runs", violations, len(runs))
				}
			case 1:
				if violations == 0 {
					t.Errorf("without the lock guard, cp-1 was never granted while cp-0 existed in %d runs: the manager alone beat the garbage collector every time, so this scenario no longer shows why the guard is needed", len(runs))
				}
			}
		})
	}
}

// runNaive makes naiveRuns naive copies, a few at a time, of Clusters set
// up all at once.
func runNaive(t *testing.T, v naiveVariant) []naiveRun {
	ctx := t.Context()
	if v.early {
		v.install(t)
	}
	nss := make([]string, naiveRuns)
	backups := make([][]*unstructured.Unstructured, naiveRuns)
	var wg sync.WaitGroup
	errs := make([]error, naiveRuns)
	for i := range naiveRuns {
		nss[i] = source.Env.Namespace(t)
		wg.Go(func() { backups[i], errs[i] = naiveSetup(ctx, nss[i]) })
	}
	wg.Wait()
	must(t, errors.Join(errs...))
	if !v.early {
		v.install(t)
	}
	runs := make([]naiveRun, naiveRuns)
	copies := make([]string, naiveRuns)
	for i := range naiveRuns {
		copies[i] = kubeenv.NamespaceName("naive-copy")
		must(t, source.Client.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: copies[i]}}))
		cleanupNamespace(t, source, copies[i])
	}
	// The copies run as many at once as the test binary's -parallel lets
	// (make test-real sets 4), each in its own namespace.
	t.Run("copies", func(t *testing.T) {
		for i := range naiveRuns {
			t.Run(copies[i], func(t *testing.T) {
				t.Parallel()
				runs[i] = naiveCopy(t, nss[i], copies[i], backups[i])
			})
		}
	})
	// CABPK asks again for a Machine it refused 30 s later: look at every
	// copy once more, 30 s after the last cp-1 was created.
	time.Sleep(30 * time.Second)
	for i, ns := range copies {
		if runs[i].secondInit {
			continue
		}
		if err := hasInitData(source, ns, naiveCP1)(ctx); err == nil {
			runs[i].secondInit = true
			runs[i].firstExisted = machineExists(t, source, ns, naiveCP0)
		}
	}
	return runs
}

// naiveSetup creates the Cluster and cp-0 in ns, waits until CABPK has
// taken the lock for cp-0 and core has given cp-0 its bootstrap data, and
// backs ns up.
func naiveSetup(ctx context.Context, ns string) ([]*unstructured.Unstructured, error) {
	if _, err := createHeld(ctx, source, ns, naiveCluster, naiveCP0, machineHasData(source, ns, naiveCP0)); err != nil {
		return nil, err
	}
	return source.Graph(ctx, ns)
}

// naiveCopy copies backed into the new namespace to, the lock with its
// ownerReference to the old Cluster UID, the rest without ownerReferences,
// and adds cp-1 there.
func naiveCopy(t *testing.T, from, to string, backed []*unstructured.Unstructured) naiveRun {
	ctx := t.Context()
	r, err := velerosim.New(source.Env.Config, velerosim.Options{Naive: true, NamespaceMapping: map[string]string{from: to}})
	must(t, err)
	items := make([]*unstructured.Unstructured, 0, len(backed))
	for _, u := range backed {
		u = u.DeepCopy()
		if u.GetKind() != "ConfigMap" || u.GetName() != naiveCluster+wire.LockSuffix {
			u.SetOwnerReferences(nil)
		}
		items = append(items, u)
	}
	restored, err := r.Restore(ctx, items)
	must(t, err)
	copied := time.Now()
	var out naiveRun
	// The lock as restored: on a loaded machine the garbage collector may
	// delete it before the first read below.
	i := slices.IndexFunc(restored, func(u *unstructured.Unstructured) bool {
		return u.GetKind() == "ConfigMap" && u.GetName() == naiveCluster+wire.LockSuffix
	})
	if i < 0 {
		t.Fatalf("the restore into %s created no lock", to)
	}
	lockUID := restored[i].GetUID()
	markProvisioned(t, source, to, naiveCluster, naiveCP0)
	// The garbage collector acts within a second.
	for time.Since(copied) < time.Second && out.lockGone == 0 {
		cm, err := kubeenv.GetLock(ctx, source.Client, to, naiveCluster)
		must(t, err)
		if cm == nil || cm.UID != lockUID || cm.DeletionTimestamp != nil {
			out.lockGone = time.Since(copied)
		}
		time.Sleep(10 * time.Millisecond)
	}
	out.secondInit, _ = addSecondMachine(t, source, to, naiveCluster, naiveCP1)
	out.firstExisted = out.secondInit && machineExists(t, source, to, naiveCP0)
	cm, err := kubeenv.GetLock(ctx, source.Client, to, naiveCluster)
	must(t, err)
	if cm != nil {
		rec, _ := wire.DecodeRecord(cm.Data[wire.DataKey])
		out.lockHolder = rec.MachineName
		if out.lockGone == 0 && cm.UID != lockUID {
			out.lockGone = time.Since(copied)
		}
	} else if out.lockGone == 0 {
		out.lockGone = time.Since(copied)
	}
	out.gcRefused = guardRefusals(t, source, userGC, to, naiveCluster+wire.LockSuffix)
	t.Logf("copy %s: lock gone %s, garbage collector refused %d times, cp-1 granted %t while cp-0 existed %t, lock holder %q",
		to, out.lockGone.Round(time.Millisecond), out.gcRefused, out.secondInit, out.firstExisted, out.lockHolder)
	return out
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

// addSecondMachine adds a control-plane Machine to an uninitialised
// Cluster whose lock another Machine holds, once core reports the
// Cluster's infrastructure provisioned, and waits for CABPK's first
// answer: granted (init data, and when, after the Machine's creation) or
// refused (waitsForInit).
func addSecondMachine(t *testing.T, m *stack.Mgmt, ns, cluster, machine string) (granted bool, after time.Duration) {
	t.Helper()
	eventually(t, time.Minute, infraProvisioned(m, ns, cluster))
	// CABPK reads the Cluster from its cache.
	time.Sleep(500 * time.Millisecond)
	must(t, m.CreateMachine(t.Context(), ns, cluster, machine, true))
	created := time.Now()
	eventually(t, time.Minute, func(ctx context.Context) error {
		if hasInitData(m, ns, machine)(ctx) == nil {
			granted, after = true, time.Since(created)
			return nil
		}
		return waitsForInit(m, ns, machine)(ctx)
	})
	return granted, after
}

// infraProvisioned returns a check that core reports the Cluster's
// infrastructure provisioned: CABPK generates no data before.
func infraProvisioned(m *stack.Mgmt, ns, cluster string) func(context.Context) error {
	return func(ctx context.Context) error {
		u, err := m.Get(ctx, stack.ClusterGVK, ns, cluster)
		if err != nil || u == nil {
			return fmt.Errorf("no Cluster %s (%w)", cluster, err)
		}
		if ok, _, _ := unstructured.NestedBool(u.Object, "status", "initialization", "infrastructureProvisioned"); !ok {
			return fmt.Errorf("cluster %s: infrastructure not provisioned yet", cluster)
		}
		return nil
	}
}

// waitsForInit returns a check that CABPK has reconciled machine's
// KubeadmConfig on the init path and been refused the lock: it reports its
// data waiting for the control plane to be initialised, which it sets
// before it asks for the lock, on a KubeadmConfig without the condition
// (the Cluster's infrastructure was provisioned at its first reconcile).
func waitsForInit(m *stack.Mgmt, ns, machine string) func(context.Context) error {
	return func(ctx context.Context) error {
		kc, err := m.Get(ctx, stack.KubeadmConfigGVK, ns, machine)
		if err != nil || kc == nil {
			return fmt.Errorf("no KubeadmConfig %s (%w)", machine, err)
		}
		conds, _, _ := unstructured.NestedSlice(kc.Object, "status", "conditions")
		if !slices.ContainsFunc(conds, func(c any) bool {
			cm, _ := c.(map[string]any)
			msg, _ := cm["message"].(string)
			return cm["type"] == "DataSecretAvailable" && strings.Contains(msg, "Waiting for Cluster control plane to be initialized")
		}) {
			return fmt.Errorf("CABPK has not reconciled %s on the init path yet", machine)
		}
		return nil
	}
}

// machineGone returns a check that the Machine name is gone from ns of m.
func machineGone(m *stack.Mgmt, ns, name string) func(context.Context) error {
	return func(ctx context.Context) error {
		if u, err := m.Get(ctx, stack.MachineGVK, ns, name); err != nil || u != nil {
			return fmt.Errorf("machine %s not gone yet (%w)", name, err)
		}
		return nil
	}
}

// machineHasData returns a check that core has copied a Machine's
// bootstrap data Secret's name into its spec: a copy of it then keeps its
// data, and CABPK restores the KubeadmConfig's status without asking for
// the lock again.
func machineHasData(m *stack.Mgmt, ns, machine string) func(context.Context) error {
	return func(ctx context.Context) error {
		u, err := m.Get(ctx, stack.MachineGVK, ns, machine)
		if err != nil || u == nil {
			return fmt.Errorf("no Machine %s (%w)", machine, err)
		}
		if s, _, _ := unstructured.NestedString(u.Object, "spec", "bootstrap", "dataSecretName"); s == "" {
			return fmt.Errorf("machine %s does not name its bootstrap data yet", machine)
		}
		return nil
	}
}
