package engine

import (
	"context"
	"errors"
	"fmt"
	"sync"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/validation"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/initlock/initlock/pkg/initlock/capi"
)

// Source is where Read reads each kind of object from: the API server (a
// manager's APIReader, an uncached client), a manager's cache, or a
// snapshot of listed objects. Machines are read as metadata only.
type Source struct {
	Locks    client.Reader
	Clusters client.Reader
	Machines client.Reader
}

// From reads every kind through r.
func From(r client.Reader) Source { return Source{Locks: r, Clusters: r, Machines: r} }

// Query says which cluster's lock Read observes, and for what.
type Query struct {
	Namespace, ClusterName string
	// APIVersion is the Cluster API group/version to read Clusters and
	// Machines in: one the API server serves (cluster.x-k8s.io/v1beta2 or
	// cluster.x-k8s.io/v1beta1). It is required: no version is assumed.
	APIVersion string
	// Intent is set on the Observation.
	Intent Intent
	// Caller, when set, is also read live (Observation.CallerLive).
	Caller *Machine
}

// Read is initlock's one reader: it gathers what Decide needs about one
// cluster's lock. It reads the lock ConfigMap and the Cluster (and the
// caller's Machine, if any) in parallel, then the Machines the lock's
// record and the grant register name, in parallel, each once; a Machine
// the caller's read already found is not read again. A missing object is
// not an error: the Observation says it is missing. It returns the lock
// ConfigMap as read, for Apply. With a cache as Source, what it returns is
// as old as the cache.
func Read(ctx context.Context, src Source, q Query) (Observation, *corev1.ConfigMap, error) {
	o := Observation{Intent: q.Intent, ClusterName: q.ClusterName, Caller: q.Caller}
	lockName, err := LockName(q.ClusterName)
	if err != nil {
		return o, nil, err
	}
	gv := q.APIVersion
	if _, err := groupVersion(gv); err != nil {
		return o, nil, err
	}
	o.APIVersion = gv
	var (
		cm                 *corev1.ConfigMap
		cl                 *Cluster
		caller             *Machine
		cmErr, clErr, mErr error
		wg                 sync.WaitGroup
	)
	wg.Go(func() { cm, cmErr = getConfigMap(ctx, src.Locks, q.Namespace, lockName) })
	wg.Go(func() { cl, clErr = getCluster(ctx, src.Clusters, gv, q.Namespace, q.ClusterName) })
	if q.Caller != nil && q.Intent != IntentUnlock {
		wg.Go(func() { caller, mErr = getMachine(ctx, src.Machines, gv, q.Namespace, q.Caller.Name) })
	}
	wg.Wait()
	if err := errors.Join(cmErr, clErr, mErr); err != nil {
		return o, nil, err
	}
	o.Cluster, o.CallerLive = cl, caller
	if cm != nil {
		o.Lock = ObserveLock(cm, q.ClusterName)
	}
	if q.Intent == IntentUnlock {
		// A release decides by the identities the records carry, and by the
		// caller's Machine read after the lock and the Cluster: a restore
		// between the reads shows the caller's object as stale, and one
		// after them makes every write of the release fail its
		// preconditions.
		if q.Caller != nil {
			if o.CallerLive, err = getMachine(ctx, src.Machines, gv, q.Namespace, q.Caller.Name); err != nil {
				return o, nil, err
			}
		}
		return o, cm, nil
	}
	var holder, granted string
	if o.Lock != nil && o.Lock.Problem == nil {
		holder = o.Lock.Record.MachineName
	}
	if g := grantThatCounts(cl); g.Held() {
		granted = g.MachineName
	}
	found, err := getMachines(ctx, src.Machines, gv, q.Namespace, q.Caller, caller, holder, granted)
	if err != nil {
		return o, nil, err
	}
	o.Holder, o.Granted = found[holder], found[granted]
	return o, cm, nil
}

// getMachines reads, in parallel and once each, the Machines named, except
// the caller's, which was read already. It returns those that exist.
func getMachines(ctx context.Context, r client.Reader, gv, namespace string, callerQ, caller *Machine, names ...string) (map[string]*Machine, error) {
	found := map[string]*Machine{}
	var others []string
	for _, name := range names {
		switch {
		case name == "":
		case callerQ != nil && name == callerQ.Name:
			if caller != nil {
				found[name] = caller
			}
		case !contains(others, name):
			others = append(others, name)
		}
	}
	read := make([]*Machine, len(others))
	errs := make([]error, len(others))
	var wg sync.WaitGroup
	for i, name := range others {
		wg.Go(func() { read[i], errs[i] = getMachine(ctx, r, gv, namespace, name) })
	}
	wg.Wait()
	for i, m := range read {
		if m != nil {
			found[others[i]] = m
		}
	}
	return found, errors.Join(errs...)
}

func contains(s []string, v string) bool {
	for _, x := range s {
		if x == v {
			return true
		}
	}
	return false
}

func getConfigMap(ctx context.Context, r client.Reader, namespace, name string) (*corev1.ConfigMap, error) {
	cm := &corev1.ConfigMap{}
	err := r.Get(ctx, client.ObjectKey{Namespace: namespace, Name: name}, cm)
	if apierrors.IsNotFound(err) {
		return nil, nil
	}
	if err != nil {
		return nil, &ReadError{Kind: "configmap", Resource: "configmaps", Namespace: namespace, Name: name, Err: err}
	}
	return cm, nil
}

func getCluster(ctx context.Context, r client.Reader, gv, namespace, name string) (*Cluster, error) {
	u := &unstructured.Unstructured{}
	v, err := groupVersion(gv)
	if err != nil {
		return nil, err
	}
	u.SetGroupVersionKind(capi.ClusterGVK(v.Version))
	err = r.Get(ctx, client.ObjectKey{Namespace: namespace, Name: name}, u)
	if apierrors.IsNotFound(err) {
		return nil, nil
	}
	if err != nil {
		return nil, &ReadError{Kind: "cluster", Resource: "clusters", Group: capi.Group, Namespace: namespace, Name: name, Err: err}
	}
	u.SetGroupVersionKind(capi.ClusterGVK(v.Version))
	cl, err := ClusterFrom(u, nil)
	if err != nil {
		return nil, err
	}
	return &cl, nil
}

// getMachine reads a Machine's metadata; nil when it does not exist. A name
// no Machine can have (a record naming one) is a Machine that does not
// exist.
func getMachine(ctx context.Context, r client.Reader, gv, namespace, name string) (*Machine, error) {
	if len(validation.IsDNS1123Subdomain(name)) > 0 {
		return nil, nil
	}
	pom := &metav1.PartialObjectMetadata{}
	v, err := groupVersion(gv)
	if err != nil {
		return nil, err
	}
	pom.SetGroupVersionKind(capi.MachineGVK(v.Version))
	err = r.Get(ctx, client.ObjectKey{Namespace: namespace, Name: name}, pom)
	if apierrors.IsNotFound(err) {
		return nil, nil
	}
	if err != nil {
		return nil, &ReadError{Kind: "machine", Resource: "machines", Group: capi.Group, Namespace: namespace, Name: name, Err: err}
	}
	pom.SetGroupVersionKind(capi.MachineGVK(v.Version))
	m, err := machineFrom(pom, nil)
	if err != nil {
		return nil, err
	}
	return &m, nil
}

// groupVersion parses a Cluster API group/version. There is no default:
// a management cluster may serve v1beta1 only, or v1beta2 only.
func groupVersion(gv string) (schema.GroupVersion, error) {
	v, err := schema.ParseGroupVersion(gv)
	if err != nil || v.Version == "" || v.Group != capi.Group {
		return schema.GroupVersion{}, fmt.Errorf("%q is not a Cluster API group/version: pass the version the API server serves, e.g. %s/%s or %s/%s",
			gv, capi.Group, capi.V1Beta2, capi.Group, capi.V1Beta1)
	}
	return v, nil
}

// ReadError is a failed read of one object. Err is the API error.
type ReadError struct {
	// Kind is the object's kind in lower case; Resource and Group name its
	// API resource, for permission messages.
	Kind, Resource, Group string
	Namespace, Name       string
	Err                   error
}

func (e *ReadError) Error() string {
	return fmt.Sprintf("reading %s %s/%s: %v", e.Kind, e.Namespace, e.Name, e.Err)
}

// Unwrap returns the API error.
func (e *ReadError) Unwrap() error { return e.Err }
