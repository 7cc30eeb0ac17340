package chaos

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/google/uuid"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/initlock/initlock/internal/capi"
	"github.com/initlock/initlock/internal/kubeenv"
	"github.com/initlock/initlock/pkg/initlock"
)

// Operations named in the bootstrap controllers' request contexts.
const (
	opLock   = "lock"
	opUnlock = "unlock"
)

// finalizer is the finalizer a planned Cluster may carry.
const finalizer = "chaos.initlock.dev/cleanup"

// Options configure Run.
type Options struct {
	// Config connects to the API server as a cluster admin.
	Config *rest.Config
	// Client is an uncached client for Config; its RESTMapper is shared by
	// the bootstrap controllers' clients. Nil builds one.
	Client client.Client
	// ManagerBinary is the initlock-manager binary the replicas run.
	ManagerBinary string
	// Dir receives a folder per scenario with the replicas' kubeconfigs
	// and logs.
	Dir string
	// SettleTimeout bounds the wait for invariant 2 after the activity.
	SettleTimeout time.Duration
}

// Result is the outcome of one scenario.
type Result struct {
	Plan      Plan
	Namespace string
	// Dir holds the replicas' logs.
	Dir           string
	Counts        Counts
	ClientFaults  FaultStats
	ManagerFaults FaultStats
	// ManagerStarts and ManagerKills count the replicas' processes;
	// ManagerExits lists those that ended by themselves.
	ManagerStarts, ManagerKills int
	ManagerExits                []string
	// Actions counts the driver's actions done, by kind; Skipped those it
	// skipped because their Cluster was busy or gone.
	Actions  map[ActionKind]int
	Skipped  int
	Restores map[string]int
	// Settle is how long the locks took to settle after the activity.
	Settle     time.Duration
	Violations []Violation
	History    *History
	// Err is a failure of the runner itself, not of initlock.
	Err     error
	Elapsed time.Duration
}

// Failed tells whether the scenario broke an invariant or could not run.
func (r *Result) Failed() bool { return len(r.Violations) > 0 || r.Err != nil }

type clusterRT struct {
	plan ClusterPlan
	mu   sync.Mutex
	busy bool
	gone bool
}

// acquire marks the cluster busy for a driver action; false when it is
// busy or gone.
func (c *clusterRT) acquire() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.busy || c.gone {
		return false
	}
	c.busy = true
	return true
}

func (c *clusterRT) release(gone bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.busy = false
	c.gone = c.gone || gone
}

func (c *clusterRT) isGone() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.gone
}

type runner struct {
	o   Options
	p   Plan
	ns  string
	dir string
	h   *History
	c   *Checker
	res *Result

	admin client.Client
	dyn   dynamic.Interface
	proxy *Proxy
	fleet *Fleet
	watch *Watcher

	clusters  []*clusterRT
	injectors []*Injector

	mu      sync.Mutex
	running map[string]bool
	// serial serialises the Lock and Unlock calls of each Machine, as a
	// controller's work queue never reconciles one object twice at once.
	serial  map[string]*sync.Mutex
	errs    []error
	agents  sync.WaitGroup
	actions sync.WaitGroup
}

// Run runs one scenario on the API server of o.Config and checks the
// invariants. It never returns an error: failures of the runner itself
// are in Result.Err, broken invariants in Result.Violations.
func Run(ctx context.Context, o Options, p Plan) *Result {
	start := time.Now()
	h := NewHistory()
	r := &runner{o: o, p: p, h: h, c: NewChecker(h), running: map[string]bool{}, serial: map[string]*sync.Mutex{},
		res: &Result{Plan: p, History: h, Actions: map[ActionKind]int{}, Restores: map[string]int{}}}
	for _, cp := range p.Clusters {
		r.clusters = append(r.clusters, &clusterRT{plan: cp})
	}
	r.res.Err = r.run(ctx)
	r.res.Violations = r.c.Violations()
	r.res.Counts = r.c.Counts()
	for _, inj := range r.injectors {
		r.res.ClientFaults = r.res.ClientFaults.Add(inj.Stats())
	}
	if r.proxy != nil {
		r.res.ManagerFaults = r.proxy.Stats()
	}
	if r.fleet != nil {
		r.res.ManagerStarts, r.res.ManagerKills, r.res.ManagerExits = r.fleet.Stats()
	}
	r.res.Elapsed = time.Since(start)
	return r.res
}

func (r *runner) fail(err error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.errs = append(r.errs, err)
	r.h.Add("driver", "runner error", "", "", oneLine(err))
}

func (r *runner) run(ctx context.Context) (retErr error) {
	var err error
	r.admin = r.o.Client
	if r.admin == nil {
		if r.admin, err = client.New(r.o.Config, client.Options{Scheme: kubeenv.Scheme()}); err != nil {
			return err
		}
	}
	if r.dyn, err = dynamic.NewForConfig(r.o.Config); err != nil {
		return err
	}
	r.ns = kubeenv.NamespaceName(fmt.Sprintf("chaos-%d", r.p.Seed))
	r.res.Namespace = r.ns
	r.dir = filepath.Join(r.o.Dir, r.ns)
	r.res.Dir = r.dir
	if err := os.MkdirAll(r.dir, 0o755); err != nil {
		return err
	}
	if err := r.admin.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: r.ns}}); err != nil {
		return fmt.Errorf("creating namespace %s: %w", r.ns, err)
	}
	defer func() {
		err := r.admin.Delete(context.WithoutCancel(ctx), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: r.ns}})
		if err != nil && !apierrors.IsNotFound(err) {
			retErr = errors.Join(retErr, err)
		}
	}()
	r.h.Addf("driver", "scenario", r.ns, "seed %d", r.p.Seed)

	if r.watch, err = StartWatcher(ctx, r.dyn, r.ns, r.h, r.c); err != nil {
		return err
	}
	r.h.Add("driver", "watching", r.ns, "", "configmaps, machines, clusters")
	defer func() {
		if err := r.watch.Stop(); err != nil {
			retErr = errors.Join(retErr, err)
		}
	}()
	if err := r.setup(ctx); err != nil {
		return err
	}

	if r.proxy, err = NewProxy(r.o.Config, r.c.Deleted); err != nil {
		return err
	}
	defer func() { retErr = errors.Join(retErr, r.proxy.Close()) }()
	if r.fleet, err = NewFleet(r.o.ManagerBinary, r.dir, r.ns, r.proxy, r.p.LeaderElection, r.p.Seed, r.h); err != nil {
		return err
	}
	r.proxy.SetFaults(r.p.ManagerFaults)
	superCtx, stopSupervise := context.WithCancel(ctx)
	superDone := make(chan error, 1)
	go func() { superDone <- r.fleet.Supervise(superCtx, r.p.Timings) }()
	defer func() {
		stopSupervise()
		retErr = errors.Join(retErr, <-superDone)
		r.fleet.StopAll()
	}()

	r.activity(ctx)
	if err := r.settle(ctx); err != nil {
		return err
	}
	if err := r.barrier(ctx); err != nil {
		return err
	}
	r.c.Drain()
	r.checkForeign(ctx)
	r.mu.Lock()
	defer r.mu.Unlock()
	return errors.Join(r.errs...)
}

// setup plants the ConfigMaps that are not locks and creates the Clusters,
// their Machines and their upstream locks.
func (r *runner) setup(ctx context.Context) error {
	foreign := []*corev1.ConfigMap{
		{ObjectMeta: metav1.ObjectMeta{Name: "app-settings"}, Data: map[string]string{"color": "blue"}},
		{ObjectMeta: metav1.ObjectMeta{Name: "ghost-lock", Labels: map[string]string{capi.ClusterNameLabel: "ghost"}},
			Data: map[string]string{"note": "labelled like a lock, has no lock record"}},
		{ObjectMeta: metav1.ObjectMeta{Name: r.p.Clusters[0].Name + "-kubeadm-config", Labels: map[string]string{capi.ClusterNameLabel: r.p.Clusters[0].Name}},
			Data: map[string]string{"ClusterConfiguration": "kind: ClusterConfiguration"}},
	}
	for _, cp := range r.p.Clusters {
		record := fmt.Sprintf(`{"machineName":%q}`, cp.Machines[0])
		switch cp.Foreign {
		case ForeignUnlabelled:
			foreign = append(foreign, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: cp.Name + initlock.LockSuffix},
				Data: map[string]string{initlock.DataKey: record}})
		case ForeignNoKey:
			foreign = append(foreign, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: cp.Name + initlock.LockSuffix,
				Labels: map[string]string{capi.ClusterNameLabel: cp.Name}}, Data: map[string]string{"owner": "someone else"}})
		case ForeignOtherCluster:
			foreign = append(foreign, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: cp.Name + initlock.LockSuffix,
				Labels: map[string]string{capi.ClusterNameLabel: "other"}}, Data: map[string]string{initlock.DataKey: record}})
		}
	}
	for _, cm := range foreign {
		cm.Namespace = r.ns
		if err := r.admin.Create(ctx, cm); err != nil {
			return fmt.Errorf("planting configmap %s: %w", cm.Name, err)
		}
		r.c.PlantForeign(ForeignConfigMap{Name: cm.Name, UID: string(cm.UID), ResourceVersion: cm.ResourceVersion, Checksum: checksum(cm)})
		r.h.Add("driver", "planted", cm.Name, cm.ResourceVersion, "a configmap that is not a lock")
	}
	for _, cp := range r.p.Clusters {
		u := kubeenv.NewCluster(capi.V1Beta2, r.ns, cp.Name)
		if cp.Finalizer {
			u.SetFinalizers([]string{finalizer})
		}
		if err := r.admin.Create(ctx, u); err != nil {
			return fmt.Errorf("creating cluster %s: %w", cp.Name, err)
		}
		for _, m := range cp.Machines {
			if err := r.admin.Create(ctx, kubeenv.NewMachine(capi.V1Beta2, r.ns, cp.Name, m)); err != nil {
				return fmt.Errorf("creating machine %s: %w", m, err)
			}
		}
		if cp.UpstreamLock {
			cm := &corev1.ConfigMap{
				ObjectMeta: metav1.ObjectMeta{Namespace: r.ns, Name: cp.Name + initlock.LockSuffix,
					Labels: map[string]string{capi.ClusterNameLabel: cp.Name},
					OwnerReferences: []metav1.OwnerReference{{APIVersion: u.GetAPIVersion(), Kind: capi.ClusterKind,
						Name: cp.Name, UID: u.GetUID()}}},
				Data: map[string]string{initlock.DataKey: fmt.Sprintf(`{"machineName":%q}`, cp.Machines[0])},
			}
			if err := r.admin.Create(ctx, cm); err != nil {
				return fmt.Errorf("creating the upstream lock of %s: %w", cp.Name, err)
			}
		}
		if cp.Initialised {
			r.c.MarkInitialised(cp.Name)
			if err := r.setStatusInitialised(ctx, cp.Name); err != nil {
				return err
			}
		} else if cp.UpstreamLock {
			r.c.UpstreamHold(cp.Name, cp.Machines[0])
		}
	}
	return nil
}

// activity runs the bootstrap controllers and the driver for the plan's
// activity time, then waits for every init and driver action to end.
func (r *runner) activity(ctx context.Context) {
	actCtx, cancel := context.WithTimeout(ctx, r.p.Activity)
	defer cancel()
	var wg sync.WaitGroup
	for i := range r.p.Controllers {
		name := fmt.Sprintf("bc-%d", i+1)
		cfg, inj := WrapConfig(r.o.Config, name, r.p.Seed*31+uint64(i), r.c.Deleted)
		inj.SetFaults(r.p.ClientFaults)
		r.injectors = append(r.injectors, inj)
		cl, err := client.New(cfg, client.Options{Scheme: kubeenv.Scheme(), Mapper: r.admin.RESTMapper()})
		if err != nil {
			r.fail(err)
			continue
		}
		bc := &controller{r: r, name: name, client: cl, locker: initlock.New(cl),
			rnd: rand.New(rand.NewPCG(r.p.Seed, uint64(100+i)))}
		wg.Add(1)
		go func() {
			defer wg.Done()
			bc.loop(actCtx, ctx)
		}()
	}
	r.drive(actCtx, ctx)
	wg.Wait()
	r.actions.Wait()
	r.agents.Wait()
}

// drive runs the plan's actions at their times; long actions run on in
// their own goroutines, under ctx, after actCtx ends.
func (r *runner) drive(actCtx, ctx context.Context) {
	start := time.Now()
	for _, a := range r.p.Actions {
		if !sleep(actCtx, time.Until(start.Add(a.At))) {
			return
		}
		r.actions.Add(1)
		go func() {
			defer r.actions.Done()
			r.act(ctx, a)
		}()
	}
	<-actCtx.Done()
}

// act does one action.
func (r *runner) act(ctx context.Context, a Action) {
	if a.Kind == ActKill {
		reps := r.fleet.Replicas()
		rep := reps[a.Replica%len(reps)]
		if r.fleet.Kill(rep, a.Delay) {
			r.count(a.Kind)
		} else {
			r.skip(a)
		}
		return
	}
	crt := r.clusters[a.Cluster%len(r.clusters)]
	if a.Held {
		crt = r.heldCluster(ctx, a.Cluster, crt)
	}
	if !crt.acquire() {
		r.skip(a)
		return
	}
	gone := false
	defer func() { crt.release(gone) }()
	name := crt.plan.Name
	r.count(a.Kind)
	r.h.Addf("driver", "action", name, "%s", a)
	var err error
	switch a.Kind {
	case ActDeleteLock:
		r.c.LockLost("driver", name)
		err = r.deleteLock(ctx, name, "operator deleted the lock")
	case ActStaleOwner:
		r.c.LockLost("driver", name)
		err = r.staleOwner(ctx, name)
	case ActPause:
		if err = r.setPaused(ctx, name, true); err == nil {
			sleep(ctx, a.Delay)
			err = r.setPaused(ctx, name, false)
		}
	case ActReplaceMachine:
		m := crt.plan.Machines[a.Machine%len(crt.plan.Machines)]
		if err = r.deleteMachines(ctx, name, []string{m}); err == nil {
			sleep(ctx, a.Delay)
			err = r.admin.Create(ctx, kubeenv.NewMachine(capi.V1Beta2, r.ns, name, m))
			r.h.Add("driver", "machine created", m, "", "a new machine with the old name")
		}
	case ActDecommission:
		gone = true
		err = r.deleteCluster(ctx, name)
	case ActRestore:
		gone, err = r.restore(ctx, crt, a.Restore)
	}
	if err != nil {
		r.fail(fmt.Errorf("%s of cluster %s: %w", a.Kind, name, err))
	}
}

// heldCluster waits up to a second for a Cluster with two Machines or more
// whose lock one of them was granted, looking from index from on; it
// returns def when there is none.
func (r *runner) heldCluster(ctx context.Context, from int, def *clusterRT) *clusterRT {
	deadline := time.Now().Add(time.Second)
	for {
		for i := range r.clusters {
			c := r.clusters[(from+i)%len(r.clusters)]
			if len(c.plan.Machines) > 1 && r.c.Granted(c.plan.Name) != "" && !c.isGone() {
				return c
			}
		}
		if time.Now().After(deadline) || !sleep(ctx, 20*time.Millisecond) {
			return def
		}
	}
}

func (r *runner) count(k ActionKind) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.res.Actions[k]++
}

func (r *runner) skip(a Action) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.res.Skipped++
	r.h.Addf("driver", "action skipped", "", "%s: busy or gone", a)
}

// backup is what a backup holds of one Cluster.
type backup struct {
	items []*unstructured.Unstructured
}

// restore backs a Cluster up, loses it (Cluster, Machines and lock) and
// restores it as the plan says. It tells whether the Cluster is gone for
// good (deleted mid-restore).
func (r *runner) restore(ctx context.Context, crt *clusterRT, rp *RestorePlan) (bool, error) {
	name := crt.plan.Name
	r.mu.Lock()
	r.res.Restores[rp.Mode+" "+rp.Order]++
	r.mu.Unlock()
	if rp.Paused {
		if err := r.setPaused(ctx, name, true); err != nil {
			return false, err
		}
	}
	b, err := r.backup(ctx, name)
	if err != nil {
		return false, err
	}
	r.h.Addf("driver", "backup", name, "%d objects", len(b.items))
	if err := r.deleteCluster(ctx, name); err != nil {
		return false, err
	}
	if err := r.deleteLock(ctx, name, "the disaster took the lock too"); err != nil {
		return false, err
	}
	rnd := rand.New(rand.NewPCG(rp.Shuffle, 1))
	items := b.items // velero order: lock, machines, cluster
	switch rp.Order {
	case OrderReverse:
		for i, j := 0, len(items)-1; i < j; i, j = i+1, j-1 {
			items[i], items[j] = items[j], items[i]
		}
	case OrderRandom:
		rnd.Shuffle(len(items), func(i, j int) { items[i], items[j] = items[j], items[i] })
	}
	abortAt := -1
	if rp.Abort >= 0 {
		abortAt = int(rp.Abort * float64(len(items)))
	}
	sleep(ctx, time.Duration(rnd.Int64N(int64(rp.Gap)+1)))
	for i, it := range items {
		if i == abortAt {
			r.h.Add("driver", "cluster deleted mid-restore", name, "", fmt.Sprintf("after %d of %d objects", i, len(items)))
			return true, r.deleteCluster(ctx, name)
		}
		obj := strip(it, rp.Mode)
		err := r.admin.Create(ctx, obj)
		switch {
		case apierrors.IsAlreadyExists(err):
			r.h.Add("driver", "restore skipped", it.GetKind()+"/"+it.GetName(), "", "exists already")
		case err != nil:
			return false, fmt.Errorf("restoring %s %s: %w", it.GetKind(), it.GetName(), err)
		default:
			r.h.Add("driver", "restored", it.GetKind()+"/"+it.GetName(), obj.GetResourceVersion(), "uid="+shortUID(string(obj.GetUID())))
		}
		sleep(ctx, time.Duration(rnd.Int64N(int64(rp.Gap)+1)))
	}
	if abortAt == len(items) {
		r.h.Add("driver", "cluster deleted after restore", name, "", "")
		return true, r.deleteCluster(ctx, name)
	}
	if r.c.Initialised(name) {
		sleep(ctx, rp.StatusAfter)
		if err := r.setStatusInitialised(ctx, name); err != nil {
			return false, err
		}
	}
	if rp.Paused {
		sleep(ctx, rp.UnpauseAfter)
		if err := r.setPaused(ctx, name, false); err != nil {
			return false, err
		}
	}
	return false, nil
}

// backup reads a Cluster, its Machines and its lock, one after the other as
// Velero does, in Velero's restore order.
func (r *runner) backup(ctx context.Context, name string) (*backup, error) {
	b := &backup{}
	cm := &corev1.ConfigMap{}
	err := r.admin.Get(ctx, client.ObjectKey{Namespace: r.ns, Name: name + initlock.LockSuffix}, cm)
	switch {
	case apierrors.IsNotFound(err):
	case err != nil:
		return nil, err
	case initlock.ObserveLock(cm, name).Problem == nil:
		u, err := toUnstructured(cm)
		if err != nil {
			return nil, err
		}
		b.items = append(b.items, u)
	}
	machines := &unstructured.UnstructuredList{}
	machines.SetGroupVersionKind(capi.MachineGVK(capi.V1Beta2).GroupVersion().WithKind("MachineList"))
	if err := r.admin.List(ctx, machines, client.InNamespace(r.ns), client.MatchingLabels{capi.ClusterNameLabel: name}); err != nil {
		return nil, err
	}
	for i := range machines.Items {
		b.items = append(b.items, &machines.Items[i])
	}
	cluster := r.clusterObject(name)
	if err := r.admin.Get(ctx, client.ObjectKeyFromObject(cluster), cluster); err != nil {
		return nil, err
	}
	b.items = append(b.items, cluster)
	return b, nil
}

// strip prepares a backed-up object for re-creation.
func strip(u *unstructured.Unstructured, mode string) *unstructured.Unstructured {
	out := u.DeepCopy()
	out.SetUID("")
	out.SetResourceVersion("")
	out.SetGeneration(0)
	out.SetCreationTimestamp(metav1.Time{})
	out.SetDeletionTimestamp(nil)
	out.SetDeletionGracePeriodSeconds(nil)
	out.SetManagedFields(nil)
	if mode == ModeVelero {
		out.SetOwnerReferences(nil)
	}
	delete(out.Object, "status")
	return out
}

func toUnstructured(obj client.Object) (*unstructured.Unstructured, error) {
	m, err := runtime.DefaultUnstructuredConverter.ToUnstructured(obj)
	if err != nil {
		return nil, err
	}
	u := &unstructured.Unstructured{Object: m}
	if _, ok := obj.(*corev1.ConfigMap); ok {
		u.SetAPIVersion("v1")
		u.SetKind("ConfigMap")
	}
	return u, nil
}

func (r *runner) clusterObject(name string) *unstructured.Unstructured {
	u := &unstructured.Unstructured{}
	u.SetGroupVersionKind(capi.ClusterGVK(capi.V1Beta2))
	u.SetNamespace(r.ns)
	u.SetName(name)
	return u
}

func (r *runner) machineObject(name string) *unstructured.Unstructured {
	u := &unstructured.Unstructured{}
	u.SetGroupVersionKind(capi.MachineGVK(capi.V1Beta2))
	u.SetNamespace(r.ns)
	u.SetName(name)
	return u
}

// deleteCluster deletes a Cluster and its Machines, as Cluster API does,
// and waits until they are gone.
func (r *runner) deleteCluster(ctx context.Context, name string) error {
	crt := r.cluster(name)
	for _, m := range crt.plan.Machines {
		r.c.MachineDeleting("driver", name, m)
	}
	if err := r.admin.Delete(ctx, r.clusterObject(name)); err != nil && !apierrors.IsNotFound(err) {
		return err
	}
	r.h.Add("driver", "cluster deleted", name, "", "")
	if err := r.deleteMachines(ctx, name, crt.plan.Machines); err != nil {
		return err
	}
	return r.waitGone(ctx, r.clusterObject(name), func(u *unstructured.Unstructured) error {
		if len(u.GetFinalizers()) == 0 {
			return nil
		}
		patch := []byte(`{"metadata":{"finalizers":null}}`)
		return r.admin.Patch(ctx, u, client.RawPatch(types.MergePatchType, patch))
	})
}

// deleteMachines deletes Machines of a Cluster and waits until they are
// gone; their holds end.
func (r *runner) deleteMachines(ctx context.Context, cluster string, names []string) error {
	for _, m := range names {
		r.c.MachineDeleting("driver", cluster, m)
		if err := r.admin.Delete(ctx, r.machineObject(m)); err != nil && !apierrors.IsNotFound(err) {
			return err
		}
		r.h.Add("driver", "machine deleted", m, "", "")
	}
	for _, m := range names {
		if err := r.waitGone(ctx, r.machineObject(m), nil); err != nil {
			return err
		}
		r.c.MachineGone(cluster, m)
	}
	return nil
}

// waitGone polls until obj is gone, calling nudge on it while it exists.
func (r *runner) waitGone(ctx context.Context, obj *unstructured.Unstructured, nudge func(*unstructured.Unstructured) error) error {
	deadline := time.Now().Add(30 * time.Second)
	for {
		u := obj.DeepCopy()
		err := r.admin.Get(ctx, client.ObjectKeyFromObject(obj), u)
		if apierrors.IsNotFound(err) {
			return nil
		}
		if err == nil && nudge != nil {
			if err := nudge(u); err != nil && !apierrors.IsNotFound(err) && !apierrors.IsConflict(err) {
				return err
			}
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%s %s still exists after 30s (last error: %w)", obj.GetKind(), obj.GetName(), err)
		}
		if !sleep(ctx, 20*time.Millisecond) {
			return ctx.Err()
		}
	}
}

func (r *runner) cluster(name string) *clusterRT {
	for _, c := range r.clusters {
		if c.plan.Name == name {
			return c
		}
	}
	panic("no cluster " + name)
}

// deleteLock deletes a Cluster's lock, if it is one, as someone outside
// initlock would.
func (r *runner) deleteLock(ctx context.Context, name, why string) error {
	cm := &corev1.ConfigMap{}
	err := r.admin.Get(ctx, client.ObjectKey{Namespace: r.ns, Name: name + initlock.LockSuffix}, cm)
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return err
	}
	if initlock.ObserveLock(cm, name).Problem != nil {
		return nil
	}
	err = r.admin.Delete(ctx, cm, client.Preconditions{UID: &cm.UID})
	if err != nil && !apierrors.IsNotFound(err) && !apierrors.IsConflict(err) {
		return err
	}
	r.h.Add("driver", "lock deleted", cm.Name, cm.ResourceVersion, why)
	return nil
}

// staleOwner points the lock's ownerReference at a Cluster UID that does not
// exist.
func (r *runner) staleOwner(ctx context.Context, name string) error {
	cm := &corev1.ConfigMap{}
	err := r.admin.Get(ctx, client.ObjectKey{Namespace: r.ns, Name: name + initlock.LockSuffix}, cm)
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return err
	}
	if initlock.ObserveLock(cm, name).Problem != nil {
		return nil
	}
	next := cm.DeepCopy()
	next.OwnerReferences = []metav1.OwnerReference{{APIVersion: capi.Group + "/" + capi.V1Beta2, Kind: capi.ClusterKind,
		Name: name, UID: types.UID(uuid.NewString())}}
	err = r.admin.Patch(ctx, next, client.MergeFromWithOptions(cm, client.MergeFromWithOptimisticLock{}))
	if apierrors.IsNotFound(err) || apierrors.IsConflict(err) {
		return nil
	}
	if err == nil {
		r.h.Add("driver", "lock owner made stale", cm.Name, next.ResourceVersion, "a naive copy: the garbage collector will delete it")
	}
	return err
}

func (r *runner) setPaused(ctx context.Context, name string, paused bool) error {
	patch := fmt.Appendf(nil, `{"spec":{"paused":%t}}`, paused)
	err := r.admin.Patch(ctx, r.clusterObject(name), client.RawPatch(types.MergePatchType, patch))
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err == nil {
		r.h.Add("driver", map[bool]string{true: "cluster paused", false: "cluster unpaused"}[paused], name, "", "")
	}
	return err
}

// setStatusInitialised writes what Cluster API writes once the control
// plane is initialised.
func (r *runner) setStatusInitialised(ctx context.Context, name string) error {
	now := time.Now().UTC().Format(time.RFC3339)
	patch := fmt.Appendf(nil, `{"status":{"initialization":{"controlPlaneInitialized":true},"conditions":[{"type":%q,"status":"True","reason":"Initialized","message":"","lastTransitionTime":%q}]}}`,
		capi.ControlPlaneInitializedCondition, now)
	err := r.admin.Status().Patch(ctx, r.clusterObject(name), client.RawPatch(types.MergePatchType, patch))
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err == nil {
		r.h.Add("driver", "status initialised", name, "", "")
	}
	return err
}

// settle ends the faults, unpauses every Cluster, lets every replica run and
// waits for invariant 2.
func (r *runner) settle(ctx context.Context) error {
	r.proxy.SetFaults(Faults{})
	r.h.Add("driver", "settling", "", "", "faults off, clusters unpaused, every replica running")
	for _, crt := range r.clusters {
		if crt.isGone() {
			continue
		}
		name := crt.plan.Name
		if err := r.setPaused(ctx, name, false); err != nil {
			return err
		}
		if r.c.Initialised(name) {
			if err := r.setStatusInitialised(ctx, name); err != nil {
				return err
			}
		}
	}
	start := time.Now()
	deadline := start.Add(r.o.SettleTimeout)
	for {
		problems, err := r.unsettled(ctx)
		if err != nil {
			return err
		}
		if len(problems) == 0 {
			r.res.Settle = time.Since(start)
			r.h.Addf("driver", "settled", "", "after %s", r.res.Settle.Round(time.Millisecond))
			return nil
		}
		if time.Now().After(deadline) {
			for _, p := range problems {
				r.c.Violate(InvSettled, "%s %s after settling", p, r.o.SettleTimeout)
			}
			return nil
		}
		if !sleep(ctx, 200*time.Millisecond) {
			return ctx.Err()
		}
	}
}

// unsettled lists the locks that break invariant 2 now.
func (r *runner) unsettled(ctx context.Context) ([]string, error) {
	cms := &corev1.ConfigMapList{}
	if err := r.admin.List(ctx, cms, client.InNamespace(r.ns)); err != nil {
		return nil, err
	}
	clusters := &unstructured.UnstructuredList{}
	clusters.SetGroupVersionKind(capi.ClusterGVK(capi.V1Beta2).GroupVersion().WithKind("ClusterList"))
	if err := r.admin.List(ctx, clusters, client.InNamespace(r.ns)); err != nil {
		return nil, err
	}
	byName := map[string]*unstructured.Unstructured{}
	for i := range clusters.Items {
		byName[clusters.Items[i].GetName()] = &clusters.Items[i]
	}
	var out []string
	for i := range cms.Items {
		cm := &cms.Items[i]
		cluster := cm.Labels[capi.ClusterNameLabel]
		if cluster == "" || cm.Name != cluster+initlock.LockSuffix || initlock.ObserveLock(cm, cluster).Problem != nil {
			continue
		}
		u := byName[cluster]
		switch {
		case u == nil:
			out = append(out, fmt.Sprintf("lock %s (rv %s): its cluster is gone and it was not collected", cm.Name, cm.ResourceVersion))
		case capi.IsControlPlaneInitialized(u):
			out = append(out, fmt.Sprintf("lock %s (rv %s): its cluster is initialised and it was not released", cm.Name, cm.ResourceVersion))
		}
	}
	sort.Strings(out)
	return out, nil
}

// barrier creates one object of each watched kind and waits until the
// watches deliver them: every earlier event has then been delivered.
func (r *runner) barrier(ctx context.Context) error {
	const name = "zz-barrier"
	objs := [numKinds]client.Object{
		KindConfigMap: &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: r.ns, Name: name}},
		KindMachine:   kubeenv.NewMachine(capi.V1Beta2, r.ns, name, name),
		KindCluster:   kubeenv.NewCluster(capi.V1Beta2, r.ns, name),
	}
	for _, o := range objs {
		if err := r.admin.Create(ctx, o); err != nil {
			return fmt.Errorf("creating the barrier %T: %w", o, err)
		}
	}
	wctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	for k := range objs {
		if err := r.watch.WaitSeen(wctx, k, name); err != nil {
			return err
		}
	}
	return nil
}

// checkForeign compares every planted ConfigMap with what was planted.
func (r *runner) checkForeign(ctx context.Context) {
	for _, f := range r.c.Foreign() {
		cm := &corev1.ConfigMap{}
		err := r.admin.Get(ctx, client.ObjectKey{Namespace: r.ns, Name: f.Name}, cm)
		switch {
		case apierrors.IsNotFound(err):
			r.c.Violate(InvForeignUntouched, "configmap %s, which is not a lock, was deleted", f.Name)
		case err != nil:
			r.fail(err)
		case string(cm.UID) != f.UID || cm.ResourceVersion != f.ResourceVersion || checksum(cm) != f.Checksum:
			r.c.Violate(InvForeignUntouched, "configmap %s, which is not a lock, changed: uid %s->%s, rv %s->%s, checksum %s->%s",
				f.Name, f.UID, cm.UID, f.ResourceVersion, cm.ResourceVersion, f.Checksum, checksum(cm))
		}
	}
}

// checksum hashes what a change to a ConfigMap could touch.
func checksum(cm *corev1.ConfigMap) string {
	b, err := json.Marshal([]any{cm.Labels, cm.Annotations, cm.Data, cm.BinaryData, cm.OwnerReferences, cm.Finalizers})
	if err != nil {
		panic(err)
	}
	s := sha256.Sum256(b)
	return hex.EncodeToString(s[:8])
}

// sleep waits d or until ctx ends; false when ctx ended.
func sleep(ctx context.Context, d time.Duration) bool {
	if d <= 0 {
		return ctx.Err() == nil
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C:
		return true
	}
}

// Summary is a one-line description of a result.
func (r *Result) Summary() string {
	c := r.Counts
	var acts []string
	for k, v := range r.Actions {
		acts = append(acts, fmt.Sprintf("%s=%d", k, v))
	}
	sort.Strings(acts)
	return fmt.Sprintf("seed %d: %d violations; %d Lock calls, %d grants, %d re-locks, %d refused, %d errors (+%d paused, %d not a lock); %d unlocks; %d inits; "+
		"lock deletes: manager %d, unlock %d, other %d; faults client %d/%d manager %d/%d; manager starts %d kills %d; actions %s (skipped %d); settled in %s; %s",
		r.Plan.Seed, len(r.Violations), c.LockCalls, c.Grants, c.ReLocks, c.Refused, c.LockErrors, c.Paused, c.NotALock, c.UnlockCalls, c.Inits,
		c.DeletesByManager, c.DeletesByUnlock, c.DeletesExternal,
		r.ClientFaults.Injected(), r.ClientFaults.Requests, r.ManagerFaults.Injected(), r.ManagerFaults.Requests,
		r.ManagerStarts, r.ManagerKills, strings.Join(acts, " "), r.Skipped, r.Settle.Round(time.Millisecond), r.Elapsed.Round(time.Millisecond))
}

// Totals sum the results of many scenarios.
type Totals struct {
	Scenarios, Failed, Violations int
	Counts                        Counts
	ClientFaults, ManagerFaults   FaultStats
	ManagerStarts, ManagerKills   int
	Actions                       map[ActionKind]int
	Restores                      map[string]int
	Elapsed                       time.Duration
}

// Add adds a result.
func (t *Totals) Add(r *Result) {
	if t.Actions == nil {
		t.Actions, t.Restores = map[ActionKind]int{}, map[string]int{}
	}
	t.Scenarios++
	if r.Failed() {
		t.Failed++
	}
	t.Violations += len(r.Violations)
	t.Counts = t.Counts.Add(r.Counts)
	t.ClientFaults = t.ClientFaults.Add(r.ClientFaults)
	t.ManagerFaults = t.ManagerFaults.Add(r.ManagerFaults)
	t.ManagerStarts += r.ManagerStarts
	t.ManagerKills += r.ManagerKills
	for k, v := range r.Actions {
		t.Actions[k] += v
	}
	for k, v := range r.Restores {
		t.Restores[k] += v
	}
	t.Elapsed += r.Elapsed
}

func (t *Totals) String() string {
	c := t.Counts
	var b strings.Builder
	fmt.Fprintf(&b, "%d scenarios (%d failed), %d violations, %s\n", t.Scenarios, t.Failed, t.Violations, t.Elapsed.Round(time.Second))
	fmt.Fprintf(&b, "  Lock calls %d: grants %d, re-locks %d, refused %d, errors %d (paused %d, not a lock %d), acquired by a machine being deleted %d\n",
		c.LockCalls, c.Grants, c.ReLocks, c.Refused, c.LockErrors+c.Paused+c.NotALock, c.Paused, c.NotALock, c.AcquiredDeleted)
	fmt.Fprintf(&b, "  inits %d, failed inits unlocked %d (Unlock errors %d)\n", c.Inits, c.UnlockCalls, c.UnlockErrors)
	fmt.Fprintf(&b, "  lock deletions: by the manager %d, by Unlock %d, by others (garbage collector, operator, disaster) %d\n",
		c.DeletesByManager, c.DeletesByUnlock, c.DeletesExternal)
	fmt.Fprintf(&b, "  faults injected: bootstrap clients %d of %d requests, managers %d of %d\n",
		t.ClientFaults.Injected(), t.ClientFaults.Requests, t.ManagerFaults.Injected(), t.ManagerFaults.Requests)
	fmt.Fprintf(&b, "  manager processes started %d, SIGKILLed %d\n", t.ManagerStarts, t.ManagerKills)
	keys := make([]string, 0, len(t.Actions))
	for k := range t.Actions {
		keys = append(keys, string(k))
	}
	sort.Strings(keys)
	b.WriteString("  actions:")
	for _, k := range keys {
		fmt.Fprintf(&b, " %s=%d", k, t.Actions[ActionKind(k)])
	}
	keys = keys[:0]
	for k := range t.Restores {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	b.WriteString("\n  restores:")
	for _, k := range keys {
		fmt.Fprintf(&b, " %q=%d", k, t.Restores[k])
	}
	return b.String()
}
