package engine

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/initlock/initlock/pkg/initlock/capi"
)

const (
	// HeldFinalizer on a lock keeps it while its holder may be running
	// kubeadm init: initlock-manager puts it on every lock held by an
	// existing Machine of an uninitialised Cluster, so that a delete (the
	// garbage collector's, an operator's, a bootstrap provider's) leaves the
	// lock in place, being deleted, until the manager lets it go: once the
	// control plane is initialised, the holder is gone, the Cluster is
	// deleted, or the holder's bootstrap configuration failed and was given
	// up (DisarmedAnnotation). While the lock is being deleted a provider's
	// create of it fails (AlreadyExists), and providers that read it find
	// its holder.
	HeldFinalizer = AnnotationPrefix + "held"
	// DisarmedAnnotation on a lock being deleted records that its holder's
	// bootstrap provider released it after failing to generate the init
	// data, and since when: "<holder> <RFC3339 time>". The record then names
	// DisarmedHolder, which no Machine can be, so that no provider takes the
	// lock for that holder any more; once the failure has lasted the
	// manager's settle time and the holder still has no bootstrap data, the
	// finalizer is removed and the lock goes.
	DisarmedAnnotation = AnnotationPrefix + "disarmed"
	// DisarmedHolder is the machine name a disarmed lock's record carries:
	// not a valid Machine name, so no Machine ever holds it.
	DisarmedHolder = "initlock:released"
)

// Disarm is a lock's DisarmedAnnotation.
type Disarm struct {
	// Holder is the Machine the lock named.
	Holder string
	// Since is when the lock was disarmed.
	Since time.Time
}

func parseDisarm(v string) (*Disarm, bool) {
	holder, ts, ok := strings.Cut(v, " ")
	if !ok || holder == "" {
		return nil, false
	}
	t, err := time.Parse(time.RFC3339, ts)
	if err != nil {
		return nil, false
	}
	return &Disarm{Holder: holder, Since: t}, true
}

func (d Disarm) encode() string { return d.Holder + " " + d.Since.UTC().Format(time.RFC3339) }

// protection fills in what a lock's metadata says of its protection.
func (l *Lock) protection(cm *corev1.ConfigMap) {
	l.Protected = slices.Contains(cm.Finalizers, HeldFinalizer)
	l.Deleting = cm.DeletionTimestamp != nil
	if v, ok := cm.Annotations[DisarmedAnnotation]; ok {
		l.Disarmed, _ = parseDisarm(v)
	}
}

// Bootstrap is what the lock needs to know of its holder's bootstrap: has
// the Machine got its bootstrap data, and does its bootstrap configuration
// report that generating it failed.
type Bootstrap struct {
	// DataSecretName is the Machine's spec.bootstrap.dataSecretName.
	DataSecretName string
	// Failed tells that the bootstrap configuration reports that
	// generating the bootstrap data or the certificates failed (CABPK's
	// DataSecretGenerationFailed and CertificatesGenerationFailed), and
	// Reason says which.
	Failed bool
	Reason string
}

// HasData tells whether the Machine has its bootstrap data: it may be
// running kubeadm init.
func (b *Bootstrap) HasData() bool { return b == nil || b.DataSecretName != "" }

// failureReasons are the condition reasons with which CABPK (and the
// providers that copy it) report a failed generation of the init data.
var failureReasons = []string{"DataSecretGenerationFailed", "CertificatesGenerationFailed"}

// readBootstrap reads Machine name in full and its bootstrap
// configuration, for the keeper's decision on a held lock being deleted.
// nil when the Machine does not exist.
func readBootstrap(ctx context.Context, r client.Reader, gv, namespace, name string) (*Bootstrap, error) {
	v, err := groupVersion(gv)
	if err != nil {
		return nil, err
	}
	m := &unstructured.Unstructured{}
	m.SetGroupVersionKind(v.WithKind(capi.MachineKind))
	if err := r.Get(ctx, client.ObjectKey{Namespace: namespace, Name: name}, m); err != nil {
		if apierrors.IsNotFound(err) {
			return nil, nil
		}
		return nil, &ReadError{Kind: "machine", Resource: "machines", Group: capi.Group, Namespace: namespace, Name: name, Err: err}
	}
	b := &Bootstrap{}
	b.DataSecretName, _, _ = unstructured.NestedString(m.Object, "spec", "bootstrap", "dataSecretName")
	ref, ok, _ := unstructured.NestedMap(m.Object, "spec", "bootstrap", "configRef")
	if !ok {
		return b, nil
	}
	kind, _ := ref["kind"].(string)
	cname, _ := ref["name"].(string)
	group, _ := ref["apiGroup"].(string) // v1beta2
	apiVersion, _ := ref["apiVersion"].(string)
	if apiVersion == "" && group == "" {
		return b, nil
	}
	cfg := &unstructured.Unstructured{}
	if apiVersion != "" {
		cfg.SetAPIVersion(apiVersion)
	} else {
		// A v1beta2 reference names the group only: read the configuration
		// in the version the Machine is read in, as CAPI serves its
		// bootstrap providers' contract versions alike.
		cfg.SetGroupVersionKind(schema.GroupVersionKind{Group: group, Version: v.Version, Kind: kind})
	}
	cfg.SetKind(kind)
	if err := r.Get(ctx, client.ObjectKey{Namespace: namespace, Name: cname}, cfg); err != nil {
		if apierrors.IsNotFound(err) || meta.IsNoMatchError(err) || apierrors.IsForbidden(err) {
			// Nothing tells of a failure (a kind not served, or not
			// readable: another provider's): the lock stays held.
			return b, nil
		}
		return nil, &ReadError{Kind: strings.ToLower(kind), Resource: strings.ToLower(kind) + "s", Group: cfg.GroupVersionKind().Group, Namespace: namespace, Name: cname, Err: err}
	}
	b.Failed, b.Reason = failedGeneration(cfg.Object)
	return b, nil
}

// failedGeneration looks for a condition, in any of the status's condition
// lists, that is false with a failure reason.
func failedGeneration(obj map[string]any) (bool, string) {
	var lists [][]any
	for _, path := range [][]string{{"status", "conditions"}, {"status", "deprecated", "v1beta1", "conditions"}, {"status", "v1beta2", "conditions"}} {
		if l, ok, _ := unstructured.NestedSlice(obj, path...); ok {
			lists = append(lists, l)
		}
	}
	for _, l := range lists {
		for _, c := range l {
			m, _ := c.(map[string]any)
			reason, _ := m["reason"].(string)
			if m["status"] == "False" && slices.Contains(failureReasons, reason) {
				return true, fmt.Sprintf("%s: %v", reason, m["message"])
			}
		}
	}
	return false, ""
}

// protectLock makes a protection decision's one patch of lock cm,
// conditional on the resourceVersion read: put HeldFinalizer on it (and
// adopt it for the Cluster, when it needs it), remove it, disarm it for
// its failed holder, or give it back to that holder.
func protectLock(ctx context.Context, c client.Writer, cm *corev1.ConfigMap, o Observation, action Action, now time.Time) (*corev1.ConfigMap, error) {
	next := cm.DeepCopy()
	switch action {
	case ActionProtect:
		if o.Cluster == nil {
			return nil, fmt.Errorf("protecting lock %s/%s: its cluster does not exist", cm.Namespace, cm.Name)
		}
		next.Finalizers = append(next.Finalizers, HeldFinalizer)
		if needsAdoption(o.Lock, ownerState(o.Lock, o.Cluster)) {
			next.OwnerReferences = ownedBy(cm.OwnerReferences, *o.Cluster)
			delete(next.Annotations, ClusterAbsentAnnotation)
		}
	case ActionUnprotect:
		next.Finalizers = slices.DeleteFunc(next.Finalizers, func(f string) bool { return f == HeldFinalizer })
	case ActionDisarm:
		if next.Annotations == nil {
			next.Annotations = map[string]string{}
		}
		next.Annotations[DisarmedAnnotation] = Disarm{Holder: o.Lock.Record.MachineName, Since: now}.encode()
		next.Data[DataKey] = Record{Ref: Ref{MachineName: DisarmedHolder}}.Encode()
	case ActionRearm:
		next.Data[DataKey] = Record{Ref: Ref{MachineName: o.Lock.Disarmed.Holder}}.Encode()
		delete(next.Annotations, DisarmedAnnotation)
	}
	if err := c.Patch(ctx, next, client.MergeFromWithOptions(cm, client.MergeFromWithOptimisticLock{})); err != nil {
		return nil, err
	}
	return next, nil
}
