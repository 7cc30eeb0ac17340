package kubeenv

import (
	"context"
	"encoding/json"
	"fmt"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/initlock/initlock/internal/kubeenv/wire"
	"github.com/initlock/initlock/pkg/initlock/capi"
)

// GetLock reads the lock of cluster in namespace ns, live through c: nil,
// without an error, when there is none.
func GetLock(ctx context.Context, c client.Reader, ns, cluster string) (*corev1.ConfigMap, error) {
	cm := &corev1.ConfigMap{}
	err := c.Get(ctx, client.ObjectKey{Namespace: ns, Name: cluster + wire.LockSuffix}, cm)
	if apierrors.IsNotFound(err) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("reading the lock of cluster %s/%s: %w", ns, cluster, err)
	}
	return cm, nil
}

// MustGetLock is GetLock for a test, with t's context: it fails t on an
// error.
func MustGetLock(t testing.TB, c client.Reader, ns, cluster string) *corev1.ConfigMap {
	t.Helper()
	cm, err := GetLock(t.Context(), c, ns, cluster)
	if err != nil {
		t.Fatal(err)
	}
	return cm
}

// LockGone returns a check, for Eventually, that the lock of cluster does
// not exist.
func LockGone(ctx context.Context, c client.Reader, ns, cluster string) func() error {
	return func() error {
		cm, err := GetLock(ctx, c, ns, cluster)
		if err != nil {
			return err
		}
		if cm != nil {
			return fmt.Errorf("lock %s/%s still exists", ns, cm.Name)
		}
		return nil
	}
}

// InitializedCondition is the condition type Cluster API's core controller
// sets to True once the control plane is initialised.
const InitializedCondition = "ControlPlaneInitialized"

// InitializedStatus is the status SetInitialized writes on a Cluster of
// Cluster API version, at time now.
func InitializedStatus(version string, now time.Time) map[string]any {
	cond := map[string]any{
		"type": InitializedCondition, "status": "True",
		"lastTransitionTime": now.UTC().Format(time.RFC3339),
	}
	status := map[string]any{"conditions": []any{cond}}
	if version != capi.V1Beta1 {
		cond["reason"], cond["message"] = "Initialized", ""
		status["initialization"] = map[string]any{"controlPlaneInitialized": true}
	}
	return status
}

// SetInitialized marks a Cluster's control plane initialised as Cluster
// API reports it, through the status subresource: the
// ControlPlaneInitialized condition (the Cluster's only condition
// afterwards), and for a v1beta2 Cluster
// status.initialization.controlPlaneInitialized. The rest of the status is
// kept. cluster names the Cluster, with its apiVersion, and is set to what
// the API server returns.
func SetInitialized(ctx context.Context, c client.Client, cluster *unstructured.Unstructured) error {
	patch, err := json.Marshal(map[string]any{"status": InitializedStatus(cluster.GroupVersionKind().Version, time.Now())})
	if err != nil {
		return fmt.Errorf("encoding the status: %w", err)
	}
	if err := c.Status().Patch(ctx, cluster, client.RawPatch(types.MergePatchType, patch)); err != nil {
		return fmt.Errorf("marking cluster %s/%s initialised: %w", cluster.GetNamespace(), cluster.GetName(), err)
	}
	return nil
}
