package initlock_test

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"slices"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/events"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/initlock/initlock/pkg/initlock"
)

// A bootstrap provider's reconciler guards kubeadm init with a Locker.
// (It needs a manager and an API server; test/library runs the same calls
// against a real one.)
func Example() {
	var mgr ctrl.Manager // the provider's manager
	var cluster, machine *unstructured.Unstructured
	reconcile := func(ctx context.Context, locker *initlock.Locker) (ctrl.Result, error) {
		res, err := locker.Lock(ctx, cluster, machine)
		switch {
		case errors.Is(err, initlock.ErrClusterPaused):
			return ctrl.Result{}, nil // a restore or move is in progress
		case err != nil:
			return ctrl.Result{}, err // names the object and the way out
		case !res.Acquired:
			return ctrl.Result{RequeueAfter: res.RetryAfter}, nil // another Machine holds it
		}
		if err := generateInitData(machine); err != nil {
			// Let another Machine try.
			return ctrl.Result{}, errors.Join(err, locker.Unlock(ctx, cluster, machine))
		}
		return ctrl.Result{}, nil
	}
	if mgr != nil {
		_, _ = reconcile(context.Background(), initlock.New(mgr.GetClient(), initlock.WithAPIReader(mgr.GetAPIReader())))
	}
}

// New takes the manager's client for writes; WithAPIReader makes every
// read that a decision rests on go to the API server, never to the cache.
// WithEventRecorder takes a k8s.io/client-go/tools/events recorder
// (mgr.GetEventRecorder with controller-runtime v0.23 and later).
func ExampleNew() {
	var mgr ctrl.Manager
	var recorder events.EventRecorder
	if mgr == nil {
		return
	}
	_ = initlock.New(mgr.GetClient(),
		initlock.WithAPIReader(mgr.GetAPIReader()),
		initlock.WithEventRecorder(recorder))
}

// WithAPIReader gives the reader that every read a decision rests on goes
// to: in a provider, the manager's API reader, never its cache. Here a
// reader that records what is asked of it and answers that the API server
// cannot be reached: Lock reads the lock, the Cluster and the Machine
// through it, and returns the error.
func ExampleWithAPIReader() {
	reader := &recordingReader{}
	locker := initlock.New(offlineClient(), initlock.WithAPIReader(reader))
	_, err := locker.Lock(context.Background(),
		object("cluster.x-k8s.io/v1beta2", "Cluster", "c1"), object("cluster.x-k8s.io/v1beta2", "Machine", "c1-cp-0"))
	fmt.Println(errors.Is(err, errUnreachable))
	for _, r := range reader.sorted() {
		fmt.Println(r)
	}
	// Output:
	// true
	// Cluster ns/c1
	// ConfigMap ns/c1-lock
	// Machine ns/c1-cp-0
}

// A refused Machine is told who holds the lock and when to ask again: a
// reconcile worker never sleeps inside Lock. A Cluster paused (here, in the
// object passed) is an error, and nothing is written: this call makes no
// request at all.
func ExampleLocker_Lock() {
	locker := initlock.New(offlineClient())
	cluster := object("cluster.x-k8s.io/v1beta2", "Cluster", "c1")
	_ = unstructured.SetNestedField(cluster.Object, true, "spec", "paused")
	machine := object("cluster.x-k8s.io/v1beta2", "Machine", "c1-cp-0")

	res, err := locker.Lock(context.Background(), cluster, machine)
	switch {
	case errors.Is(err, initlock.ErrClusterPaused):
		fmt.Println("paused: try again once the restore or move is done")
	case err != nil:
		fmt.Println(err)
	case !res.Acquired:
		fmt.Printf("held by %q; asking again in %s\n", res.Holder, res.RetryAfter)
	}
	// Output: paused: try again once the restore or move is done
}

// Bad input is refused before any request, with an error that names the
// object and says what is wrong.
func ExampleLocker() {
	locker := initlock.New(offlineClient())
	cluster := object("cluster.x-k8s.io/v1beta2", "Cluster", "c1")
	machine := object("cluster.x-k8s.io/v1beta2", "Machine", "c1-cp-0")
	machine.SetNamespace("elsewhere")

	_, err := locker.Lock(context.Background(), cluster, machine)
	fmt.Println(errors.Is(err, initlock.ErrInvalidName))
	fmt.Println(err)
	// Output:
	// true
	// namespace "ns": machine "c1-cp-0": invalid name: the machine must be named and live in the cluster's namespace (it is in "elsewhere")
}

// A Result maps to a reconcile result: a refused caller asks again after
// RetryAfter, and logs the holder.
func ExampleResult() {
	requeue := func(res initlock.Result) ctrl.Result {
		if res.Acquired {
			return ctrl.Result{}
		}
		return ctrl.Result{RequeueAfter: res.RetryAfter}
	}
	refused := initlock.Result{Holder: "c1-cp-0", RetryAfter: 30 * time.Second}
	fmt.Printf("held by %s: requeue after %s\n", refused.Holder, requeue(refused).RequeueAfter)
	fmt.Printf("acquired: requeue after %s\n", requeue(initlock.Result{Acquired: true, Holder: "c1-cp-1"}).RequeueAfter)
	// Output:
	// held by c1-cp-0: requeue after 30s
	// acquired: requeue after 0s
}

// Unlock needs the Machine that holds the lock, or AnyHolder; a call
// without either is refused before any request.
func ExampleLocker_Unlock() {
	locker := initlock.New(offlineClient())
	err := locker.Unlock(context.Background(), object("cluster.x-k8s.io/v1beta2", "Cluster", "c1"), nil)
	fmt.Println(err)
	// Output: unlocking ns/c1-lock: no machine given; pass one or use AnyHolder
}

// Once the control plane is initialised the lock has done its job, whoever
// holds it: the join path releases it with AnyHolder.
func ExampleAnyHolder() {
	var locker *initlock.Locker
	var cluster *unstructured.Unstructured
	if locker == nil {
		return
	}
	if err := locker.Unlock(context.Background(), cluster, nil, initlock.AnyHolder()); err != nil {
		fmt.Println(err)
	}
}

// LockName is the lock's ConfigMap name; it fails before any API call for a
// cluster name no lock can carry.
func ExampleLockName() {
	name, err := initlock.LockName("prod-eu")
	fmt.Println(name, err)
	_, err = initlock.LockName("Not_A_Name")
	fmt.Println(errors.Is(err, initlock.ErrInvalidName))
	// Output:
	// prod-eu-lock <nil>
	// true
}

// An *Error names the object and the way out; errors.Is finds the sentinel.
func ExampleError() {
	var err error = &initlock.Error{Namespace: "capi", Name: "c1-lock", Kind: "configmap",
		Err: initlock.ErrNotALock, Detail: "it is not an init lock; refusing to touch it"}
	var e *initlock.Error
	fmt.Println(errors.As(err, &e), e.Name, errors.Is(err, initlock.ErrNotALock))
	// Output: true c1-lock true
}

func generateInitData(*unstructured.Unstructured) error { return nil }

var errUnreachable = errors.New("the API server cannot be reached")

// recordingReader records the objects asked of it and answers
// errUnreachable.
type recordingReader struct {
	mu    sync.Mutex
	reads []string
}

func (r *recordingReader) Get(_ context.Context, key client.ObjectKey, obj client.Object, _ ...client.GetOption) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	kind := obj.GetObjectKind().GroupVersionKind().Kind
	if kind == "" {
		kind = reflect.TypeOf(obj).Elem().Name()
	}
	r.reads = append(r.reads, kind+" "+key.String())
	return errUnreachable
}

func (r *recordingReader) List(context.Context, client.ObjectList, ...client.ListOption) error {
	return errUnreachable
}

func (r *recordingReader) sorted() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Compact(slices.Sorted(slices.Values(r.reads)))
}

// offlineClient is a client of an API server that is never reached: the
// examples that use it make no request.
func offlineClient() client.Client {
	c, err := client.New(&rest.Config{Host: "https://127.0.0.1:1"}, client.Options{})
	if err != nil {
		panic(err)
	}
	return c
}

// object is an unstructured Cluster API object in namespace "ns".
func object(apiVersion, kind, name string) *unstructured.Unstructured {
	u := &unstructured.Unstructured{}
	u.SetAPIVersion(apiVersion)
	u.SetKind(kind)
	u.SetNamespace("ns")
	u.SetName(name)
	return u
}
