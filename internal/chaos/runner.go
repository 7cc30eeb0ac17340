package chaos

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/initlock/initlock/internal/kubeenv"
	"github.com/initlock/initlock/internal/kubeenv/faults"
	"github.com/initlock/initlock/internal/kubeenv/velerosim"
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
	// CacheFaults are those of the bootstrap controllers' informer cache:
	// its lagged watches.
	CacheFaults FaultStats
	// ManagerStarts and ManagerKills count the replicas' processes;
	// ManagerExits lists those that ended by themselves.
	ManagerStarts, ManagerKills int
	ManagerExits                []string
	// Actions counts the driver's actions done, by the fault class they
	// inject; Skipped those it skipped because their Cluster was busy or
	// gone.
	Actions  map[faults.Class]int
	Skipped  int
	Restores map[string]int
	// Hits counts what the driver's actions found at their target, by
	// the class an action injects and its finding (hitKey: a re-created
	// Machine holding or waiting).
	Hits map[string]int
	// CutOff counts the Lock calls cut off after a random time.
	CutOff int
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
	// cache is the bootstrap controllers' informer cache, which lags by the
	// plan's CacheLag through cacheFaults.
	cache       client.Reader
	cacheFaults *Injector
	// naive makes naive copies; restores counts the Velero restores, each
	// of which has a restore of its own (newRestore); snapshots are the
	// Clusters as setup created them, by name.
	naive     *velerosim.Restorer
	restores  int
	snapshots map[string]*unstructured.Unstructured

	// running holds the Machines whose init runs; serial, a *sync.Mutex
	// per Machine, serialises its Lock and Unlock calls, as a controller's
	// work queue never reconciles one object twice at once.
	running, serial sync.Map

	mu      sync.Mutex
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
	r := &runner{o: o, p: p, h: h, c: NewChecker(h), snapshots: map[string]*unstructured.Unstructured{},
		res: &Result{Plan: p, History: h, Actions: map[faults.Class]int{}, Restores: map[string]int{}, Hits: map[string]int{}}}
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
	if r.cacheFaults != nil {
		r.res.CacheFaults = r.cacheFaults.Stats()
	}
	if r.fleet != nil {
		r.res.ManagerStarts, r.res.ManagerKills, r.res.ManagerExits = r.fleet.Stats()
	}
	r.res.Elapsed = time.Since(start)
	return r.res
}

// lateWrite records a write sent to the server after its caller gave up.
func (r *runner) lateWrite(lw LateWrite) {
	what := fmt.Sprintf("%s sent %s after the caller got an error: ", lw.Method, lw.Delay.Round(time.Millisecond))
	if lw.Err != nil {
		what += oneLine(lw.Err)
	} else {
		what += fmt.Sprintf("%d %s", lw.Code, http.StatusText(lw.Code))
	}
	r.h.Add(lw.Actor, "late write", lw.Path, "", what)
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
	cacheCtx, stopCache := context.WithCancel(ctx)
	defer stopCache()
	if err := r.startCache(cacheCtx); err != nil {
		return err
	}

	if r.proxy, err = NewProxy(r.o.Config, ProxyHooks{OnDelete: r.c.Deleted, OnLate: r.lateWrite, OnRead: r.c.MachineRead}); err != nil {
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
	r.c.CheckRelinks()
	r.checkForeign(ctx)
	r.mu.Lock()
	defer r.mu.Unlock()
	return errors.Join(r.errs...)
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
