package engine

import (
	"context"
	"errors"
	"fmt"

	"k8s.io/klog/v2"
	"k8s.io/utils/clock"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/initlock/initlock/pkg/initlock/capi"
	"github.com/initlock/initlock/pkg/initlock/internal/report"
)

// maxAttempts bounds the read-decide-write rounds of one call.
const maxAttempts = 8

// Env is what Lock and Unlock work with: the clients, the clock and the
// token source. The package initlock's Locker is an Env set up by its
// options; package keeper builds one with NewEnv for an operator's release.
type Env struct {
	// Client writes; Reader reads live (never a possibly stale cache).
	Client client.Client
	Reader client.Reader
	// Clock stamps records.
	Clock clock.PassiveClock
	// Recorder, when set, receives events on the Cluster.
	Recorder report.EventRecorder
	// Tokens makes each value written into a grant register and a lock
	// record unique: it must never return the same value twice, across
	// every Env of every process.
	Tokens func() string
}

// NewEnv returns an Env that writes and reads through c, with the real
// clock, 128-bit random tokens and no event recorder.
func NewEnv(c client.Client) *Env {
	return &Env{Client: c, Reader: c, Clock: clock.RealClock{}, Tokens: newToken}
}

// Outcome is the outcome of Lock.
type Outcome struct {
	// Acquired tells that the calling Machine holds the lock.
	Acquired bool
	// Holder is the Machine that holds the lock; empty when Lock refused
	// the caller at once, its claim of a free lock having lost the race.
	Holder string
	// Verdict is what Lock found; empty when Lock refused the caller
	// without reading the lock, its claim of a free lock having lost the
	// race.
	Verdict Verdict
	// Action is the change Lock made to the lock ConfigMap (ActionNone for
	// none).
	Action Action
	// Recreated tells that the lock had been lost while granted and Lock
	// created it again, for Holder.
	Recreated bool
}

// Lock tries to acquire cluster's init lock for machine. cluster is a
// Cluster API Cluster and machine a Machine of it, each typed (registered in
// the client's scheme), unstructured or, for machine, metadata-only. Both
// may come from a cache: Lock grants the lock only on what it reads live
// or on writes whose preconditions cover what it relies on (see the
// package documentation). When Lock writes the grant register and the
// cluster object passed was the Cluster as it stood before that write,
// Lock updates its annotations and resourceVersion to what the API server
// returned; otherwise it leaves the object untouched. Concurrent calls must
// not share one cluster object.
//
// A lock held by another existing Machine is not an error: the Outcome says
// who holds it, and when to call again. Lock never waits: a caller whose
// claim of a free lock loses the race is refused at once, with no other
// request than the claim and the read of its Machine, as the upstream lock
// refuses a caller whose create lost; it does not learn the winner's name.
// Errors wrap initlock.ErrClusterPaused, initlock.ErrClusterGone,
// initlock.ErrStaleMachine, initlock.ErrNotALock, initlock.ErrCorruptLock, initlock.ErrInvalidName,
// initlock.ErrContended or an API error.
func (l *Env) Lock(ctx context.Context, cluster, machine client.Object) (Outcome, error) {
	cl, m, lockName, err := l.prepare(cluster, machine)
	if err != nil {
		return Outcome{}, err
	}
	if cl.Paused {
		return Outcome{}, pausedError(cl)
	}
	log := ctrl.LoggerFrom(ctx).WithValues("cluster", klog.KRef(cl.Namespace, cl.Name), "machine", m.Name)
	a := &acquisition{l: l, clusterObj: cluster, cl: cl, m: m, lockName: lockName, log: log}
	return a.lock(ctx)
}

func (a *acquisition) lock(ctx context.Context) (Outcome, error) {
	if !a.cl.Initialized && !a.cl.Grant.Held() && !a.cl.Grant.Damaged() {
		if res, ok, err := a.free(ctx); ok || err != nil {
			return res, err
		}
	}
	return a.settle(ctx)
}

func (l *Env) prepare(cluster, machine client.Object) (Cluster, Machine, string, error) {
	if cluster == nil || machine == nil {
		return Cluster{}, Machine{}, "", fmt.Errorf("%w: Lock needs a cluster and a machine", report.ErrInvalidName)
	}
	cl, err := ClusterFrom(cluster, l.Client.Scheme())
	if err != nil {
		return Cluster{}, Machine{}, "", err
	}
	m, err := machineFrom(machine, l.Client.Scheme())
	if err != nil {
		return Cluster{}, Machine{}, "", err
	}
	lockName, err := LockName(cl.Name)
	if err != nil {
		return Cluster{}, Machine{}, "", &report.Error{Namespace: cl.Namespace, Name: truncate(cl.Name), Kind: "cluster", Err: err,
			Detail: "a lock name must be a DNS subdomain of at most 253 characters and the cluster name a label value of at most 63"}
	}
	if m.Name == "" || m.Namespace != cl.Namespace {
		return Cluster{}, Machine{}, "", &report.Error{Namespace: cl.Namespace, Name: m.Name, Kind: "machine", Err: report.ErrInvalidName,
			Detail: fmt.Sprintf("the machine must be named and live in the cluster's namespace (it is in %q)", m.Namespace)}
	}
	return cl, m, lockName, nil
}

func pausedError(cl Cluster) error {
	return &report.Error{Namespace: cl.Namespace, Name: cl.Name, Kind: "cluster", Err: report.ErrClusterPaused,
		Detail: "the lock is left as it is; unpause the cluster (spec.paused, annotation " + capi.PausedAnnotation + ") and try again"}
}

func lockError(namespace, name string, err error) error {
	detail := "inspect it with 'kubectl initlock list'"
	switch {
	case errors.Is(err, report.ErrNotALock):
		detail = "it is not an init lock; refusing to touch it. Rename or remove it, or rename the cluster"
	case errors.Is(err, report.ErrCorruptLock):
		detail = "it is not taken over silently; repair it with 'kubectl initlock release' once no machine is running kubeadm init"
	case errors.Is(err, report.ErrClusterPaused):
		detail = "unpause the cluster and try again"
	case errors.Is(err, report.ErrContended):
		detail = "call again"
	}
	return &report.Error{Namespace: namespace, Name: name, Kind: "configmap", Err: err, Detail: detail}
}

func (l *Env) event(regarding client.Object, eventtype, reason, note string, args ...any) {
	if l.Recorder == nil {
		return
	}
	l.Recorder.Eventf(regarding, nil, eventtype, reason, "InitLock", note, args...)
}
