package relinksuite

import (
	"testing"
	"time"

	"github.com/go-logr/logr"
	"github.com/prometheus/client_golang/prometheus"
	velerov1 "github.com/vmware-tanzu/velero/pkg/apis/velero/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/initlock/initlock/internal/kubeenv"
	"github.com/initlock/initlock/internal/kubeenv/wire"
	"github.com/initlock/initlock/internal/relink"
	"github.com/initlock/initlock/test/managertest"
)

// TestRelinkerInInitlockManager runs the relinker with its default kinds
// inside the manager that initlock-manager builds, next to the lock
// controller: a restored init lock is linked to the Cluster once it is
// restored, and a restored kubeconfig Secret is left alone (Secrets are
// opt-in).
func TestRelinkerInInitlockManager(t *testing.T) {
	ns := env.Namespace(t)
	opts := managertest.Options(ns)
	opts.Logger = logr.Discard()
	opts.Setups = append(opts.Setups, relink.ManagerSetup(relink.Options{Namespace: ns, Registry: prometheus.NewRegistry()}))
	managertest.StartNoWait(t, env.Config, opts)

	secret := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "c1-kubeconfig",
		Labels:      map[string]string{wire.ClusterNameLabel: "c1"},
		Annotations: map[string]string{relink.Annotation: relink.Encode([]relink.OwnerRef{controllerOwner("Cluster", "c1")})},
	}}
	lock := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "c1" + wire.LockSuffix,
		Labels:      map[string]string{wire.ClusterNameLabel: "c1", velerov1.RestoreNameLabel: restoreName},
		Annotations: map[string]string{relink.Annotation: relink.Encode([]relink.OwnerRef{clusterOwner("c1")})},
	}, Data: map[string]string{wire.DataKey: wire.Record{Ref: wire.Ref{MachineName: "c1-cp-0"}}.Encode()}}
	if err := env.Client.Create(t.Context(), secret); err != nil {
		t.Fatal(err)
	}
	if err := env.Client.Create(t.Context(), lock); err != nil {
		t.Fatal(err)
	}
	create(t, kubeenv.NewMachine(env.CAPIVersion, ns, "c1", "c1-cp-0"))
	cluster := create(t, restored(t, kubeenv.NewCluster(env.CAPIVersion, ns, "c1")))

	// The lock controller may adopt the lock first; either way it ends
	// with one reference to the Cluster and without the annotation.
	kubeenv.Eventually(t, 30*time.Second, linked(t, configMapGVK, ns, "c1"+wire.LockSuffix, refTo(cluster, false)))
	got := &corev1.Secret{}
	if err := env.Client.Get(t.Context(), client.ObjectKeyFromObject(secret), got); err != nil {
		t.Fatal(err)
	}
	if _, ok := got.Annotations[relink.Annotation]; !ok || len(got.OwnerReferences) > 0 {
		t.Fatalf("Secret relinked by default: annotations %v, ownerReferences %v", got.Annotations, got.OwnerReferences)
	}
}
