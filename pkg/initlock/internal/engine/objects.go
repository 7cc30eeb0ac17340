package engine

import (
	"fmt"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/apiutil"

	"github.com/initlock/initlock/pkg/initlock/capi"
)

// Cluster is what the lock needs to know of a Cluster API Cluster.
type Cluster struct {
	Namespace, Name string
	UID             types.UID
	// APIVersion is the Cluster's group/version, e.g. cluster.x-k8s.io/v1beta2.
	APIVersion  string
	Paused      bool
	Initialized bool
	Deleting    bool
	// Created is the Cluster's creationTimestamp: a Cluster restored from
	// a backup is as young as its restore.
	Created time.Time
	// Grant is the Cluster's grant register (GrantAnnotation), nil when
	// empty.
	Grant *Grant
	// HasAnnotations tells whether the Cluster had any annotation when
	// read; the register's compare-and-swap is written differently without.
	HasAnnotations bool
	// ResourceVersion and Generation are the Cluster's when read.
	ResourceVersion string
	Generation      int64

	// pausedSpec is how spec.paused stood when read, for the register's
	// compare-and-swap to test that the Cluster is still not paused.
	pausedSpec specPaused
}

// specPaused is how a Cluster's spec.paused stood when it was read.
type specPaused int

const (
	specPausedAbsent specPaused = iota // spec.paused not set
	specPausedFalse                    // spec.paused: false
	specMissing                        // no spec at all
	specPausedOther                    // anything else (the Cluster is paused, or spec.paused is not a boolean)
)

// ClusterFrom reads a Cluster of any served version. obj is an unstructured
// object or a typed Cluster API Cluster registered in scheme; scheme is
// needed only for typed objects whose TypeMeta is empty.
func ClusterFrom(obj client.Object, scheme *runtime.Scheme) (Cluster, error) {
	u, err := toUnstructured(obj, scheme)
	if err != nil {
		return Cluster{}, fmt.Errorf("reading cluster %s/%s: %w", obj.GetNamespace(), obj.GetName(), err)
	}
	if u.GroupVersionKind().GroupKind() != capi.ClusterGVK("").GroupKind() {
		return Cluster{}, fmt.Errorf("reading cluster %s/%s: %s is not a Cluster API Cluster", obj.GetNamespace(), obj.GetName(), u.GroupVersionKind())
	}
	return Cluster{
		Namespace:   u.GetNamespace(),
		Name:        u.GetName(),
		UID:         u.GetUID(),
		APIVersion:  u.GetAPIVersion(),
		Paused:      capi.IsPaused(u),
		Initialized: capi.IsControlPlaneInitialized(u),
		Deleting:    u.GetDeletionTimestamp() != nil,
		Created:     u.GetCreationTimestamp().Time,
		Grant:       GrantFrom(u.GetAnnotations()),

		HasAnnotations:  len(u.GetAnnotations()) > 0,
		ResourceVersion: u.GetResourceVersion(),
		Generation:      u.GetGeneration(),
		pausedSpec:      pausedSpecOf(u),
	}, nil
}

func pausedSpecOf(u *unstructured.Unstructured) specPaused {
	spec, ok := u.Object["spec"]
	if !ok {
		return specMissing
	}
	m, ok := spec.(map[string]any)
	if !ok {
		return specPausedOther
	}
	v, ok := m["paused"]
	switch {
	case !ok:
		return specPausedAbsent
	case v == false:
		return specPausedFalse
	}
	return specPausedOther
}

func toUnstructured(obj client.Object, scheme *runtime.Scheme) (*unstructured.Unstructured, error) {
	if u, ok := obj.(*unstructured.Unstructured); ok {
		return u, nil
	}
	m, err := runtime.DefaultUnstructuredConverter.ToUnstructured(obj)
	if err != nil {
		return nil, err
	}
	u := &unstructured.Unstructured{Object: m}
	if u.GetKind() == "" && scheme != nil {
		gvk, err := apiutil.GVKForObject(obj, scheme)
		if err != nil {
			return nil, err
		}
		u.SetGroupVersionKind(gvk)
	}
	return u, nil
}

// Machine is what the lock needs to know of a Cluster API Machine: who it
// is.
type Machine struct {
	Namespace, Name string
	UID             types.UID
	// APIVersion is the Machine's group/version.
	APIVersion string
}

// machineFrom reads the identity of a Machine given as any object, typed,
// unstructured or metadata-only.
func machineFrom(obj client.Object, scheme *runtime.Scheme) (Machine, error) {
	gvk := obj.GetObjectKind().GroupVersionKind()
	if gvk.Kind == "" && scheme != nil {
		var err error
		if gvk, err = apiutil.GVKForObject(obj, scheme); err != nil {
			return Machine{}, fmt.Errorf("reading machine %s/%s: %w", obj.GetNamespace(), obj.GetName(), err)
		}
	}
	if gvk.GroupKind() != capi.MachineGVK("").GroupKind() {
		return Machine{}, fmt.Errorf("reading machine %s/%s: %s is not a Cluster API Machine", obj.GetNamespace(), obj.GetName(), gvk)
	}
	return Machine{
		Namespace:  obj.GetNamespace(),
		Name:       obj.GetName(),
		UID:        obj.GetUID(),
		APIVersion: gvk.GroupVersion().String(),
	}, nil
}

// Lock is an observed ConfigMap that has a cluster's lock name.
type Lock struct {
	Namespace, Name string
	UID             types.UID
	ResourceVersion string
	Created         time.Time
	// Record is the lock record; valid when Problem is nil.
	Record Record
	// Problem wraps initlock.ErrNotALock or initlock.ErrCorruptLock when the ConfigMap is not
	// a usable lock.
	Problem error
	// OwnerReferences as found.
	OwnerReferences []metav1.OwnerReference
	// ClusterAbsentSince is set when the lock carries a valid cluster-absent
	// mark: one made for this incarnation of the lock.
	ClusterAbsentSince *time.Time
	// StaleMark tells that the lock carries a cluster-absent mark that is
	// not valid for it (made before a restore or move, or unreadable).
	StaleMark bool
	// Releasable tells that the lock carries its own release mark
	// (ReleaseAnnotation): a release was decided and its delete is on its
	// way, or was cut off.
	Releasable bool
	// ReleaseStarted is when the release that marked it began
	// (ReleaseStartedAnnotation), when it says.
	ReleaseStarted *time.Time
	// MoveMark tells that the lock carries clusterctl move's
	// delete-for-move annotation (MoveAnnotation), which the admission
	// policy lets a delete through with.
	MoveMark bool
	// Deleting tells that the lock is being deleted, held back by a
	// finalizer of another controller's (initlock puts none on it).
	Deleting bool
}

// ObserveLock reads cm as the lock of cluster clusterName.
func ObserveLock(cm *corev1.ConfigMap, clusterName string) *Lock {
	l := &Lock{
		Namespace:       cm.Namespace,
		Name:            cm.Name,
		UID:             cm.UID,
		ResourceVersion: cm.ResourceVersion,
		Created:         cm.CreationTimestamp.Time,
		OwnerReferences: cm.OwnerReferences,
	}
	l.Record, l.Problem = classify(cm, clusterName)
	l.Releasable, l.Deleting = marked(cm), cm.DeletionTimestamp != nil
	_, l.MoveMark = cm.Annotations[MoveAnnotation]
	if t, err := time.Parse(time.RFC3339, cm.Annotations[ReleaseStartedAnnotation]); err == nil && l.Releasable {
		l.ReleaseStarted = &t
	}
	if v, ok := cm.Annotations[ClusterAbsentAnnotation]; ok {
		since, uid, ok := parseAbsentMark(v)
		if ok && uid == cm.UID {
			l.ClusterAbsentSince = &since
		} else {
			l.StaleMark = true
		}
	}
	return l
}

// marked tells whether cm carries its own release mark.
func marked(cm *corev1.ConfigMap) bool {
	v, ok := cm.Annotations[ReleaseAnnotation]
	return ok && types.UID(v) == cm.UID
}

// absentMark encodes the cluster-absent mark: "<RFC3339 time> <lock UID>".
func absentMark(since time.Time, lockUID types.UID) string {
	return since.UTC().Format(time.RFC3339) + " " + string(lockUID)
}

func parseAbsentMark(v string) (time.Time, types.UID, bool) {
	ts, uid, ok := strings.Cut(v, " ")
	if !ok {
		return time.Time{}, "", false
	}
	t, err := time.Parse(time.RFC3339, ts)
	if err != nil {
		return time.Time{}, "", false
	}
	return t, types.UID(uid), true
}
