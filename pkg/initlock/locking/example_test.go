package locking_test

import (
	"context"
	"errors"
	"fmt"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	ctrl "sigs.k8s.io/controller-runtime"

	"github.com/initlock/initlock/pkg/initlock"
	"github.com/initlock/initlock/pkg/initlock/locking"
)

// InitLocker is the provider's interface to its init lock, as CABPK's
// reconciler declares it (with *clusterv1.Cluster and *clusterv1.Machine
// there).
type InitLocker interface {
	Lock(ctx context.Context, cluster, machine *unstructured.Unstructured) bool
	Unlock(ctx context.Context, cluster *unstructured.Unstructured) bool
}

// Reconciler is the part of a bootstrap provider's reconciler that guards
// kubeadm init. The markers are the permissions the lock needs.
//
// +kubebuilder:rbac:groups=cluster.x-k8s.io,resources=clusters,verbs=get;patch
// +kubebuilder:rbac:groups=cluster.x-k8s.io,resources=machines,verbs=get
// +kubebuilder:rbac:groups="",resources=configmaps,verbs=get;create;patch;delete
// +kubebuilder:rbac:groups=events.k8s.io,resources=events,verbs=create;patch
type Reconciler struct {
	InitLock InitLocker
	// Generate writes the bootstrap data of a control-plane Machine.
	Generate func(machine string, init bool) error
}

// SetupWithManager sets the real lock, as a provider does: the manager's
// client writes, its API reader reads live.
func (r *Reconciler) SetupWithManager(mgr ctrl.Manager) {
	r.InitLock = locking.NewControlPlaneInitMutex[*unstructured.Unstructured, *unstructured.Unstructured](mgr.GetClient(),
		initlock.WithAPIReader(mgr.GetAPIReader()))
}

// ReconcileControlPlane generates the data of a control-plane Machine:
// kubeadm init for the Machine that holds the lock, kubeadm join once the
// control plane is initialised.
func (r *Reconciler) ReconcileControlPlane(ctx context.Context, cluster, machine *unstructured.Unstructured, initialized bool) (ctrl.Result, error) {
	if initialized {
		// The join path: the lock has done its job, whoever holds it.
		r.InitLock.Unlock(ctx, cluster)
		return ctrl.Result{}, r.Generate(machine.GetName(), false)
	}
	if !r.InitLock.Lock(ctx, cluster, machine) {
		return ctrl.Result{RequeueAfter: 30 * time.Second}, nil
	}
	if err := r.Generate(machine.GetName(), true); err != nil {
		// Let another Machine try.
		if !r.InitLock.Unlock(ctx, cluster) {
			return ctrl.Result{}, errors.Join(err, errors.New("failed to release the init lock"))
		}
		return ctrl.Result{}, err
	}
	return ctrl.Result{}, nil
}

// memoryLock stands in for the mutex so that the example runs without an
// API server: it keeps the holder in memory and prints every call. The real
// mutex, set by SetupWithManager, answers the same calls the same way on
// these paths; test/library runs it on a real API server.
type memoryLock struct{ holder string }

func (l *memoryLock) Lock(_ context.Context, _, machine *unstructured.Unstructured) bool {
	if l.holder == "" {
		l.holder = machine.GetName()
	}
	fmt.Printf("Lock(%s) = %v\n", machine.GetName(), l.holder == machine.GetName())
	return l.holder == machine.GetName()
}

func (l *memoryLock) Unlock(context.Context, *unstructured.Unstructured) bool {
	fmt.Printf("Unlock() released %s\n", l.holder)
	l.holder = ""
	return true
}

func object(name string) *unstructured.Unstructured {
	u := &unstructured.Unstructured{}
	u.SetName(name)
	return u
}

// A reconciler takes the lock for the first control-plane Machine, releases
// it when generating the init data fails so that another Machine can try,
// and releases it on the join path once the control plane is initialised.
func Example() {
	ctx := context.Background()
	failures := 1
	r := &Reconciler{InitLock: &memoryLock{}, Generate: func(machine string, init bool) error {
		if init && failures > 0 {
			failures--
			return errors.New("generating the init data of " + machine + " failed")
		}
		fmt.Printf("generated the %s data of %s\n", map[bool]string{true: "init", false: "join"}[init], machine)
		return nil
	}}
	cluster := object("c1")
	for _, step := range []struct {
		machine     string
		initialized bool
	}{{"cp-0", false}, {"cp-1", false}, {"cp-2", false}, {"cp-2", true}} {
		res, err := r.ReconcileControlPlane(ctx, cluster, object(step.machine), step.initialized)
		fmt.Printf("  requeue after %v, error: %v\n", res.RequeueAfter, err)
	}
	// Output:
	// Lock(cp-0) = true
	// Unlock() released cp-0
	//   requeue after 0s, error: generating the init data of cp-0 failed
	// Lock(cp-1) = true
	// generated the init data of cp-1
	//   requeue after 0s, error: <nil>
	// Lock(cp-2) = false
	//   requeue after 30s, error: <nil>
	// Unlock() released cp-1
	// generated the join data of cp-2
	//   requeue after 0s, error: <nil>
}
