package relinksuite

import (
	"fmt"
	"strings"
	"testing"
	"time"

	velerov1 "github.com/vmware-tanzu/velero/pkg/apis/velero/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/initlock/initlock/internal/kubeenv"
	"github.com/initlock/initlock/internal/relink"
	"github.com/initlock/initlock/pkg/initlock/capi"
)

func TestPausedClustersAreLeftAlone(t *testing.T) {
	for _, tt := range []struct {
		name    string
		pause   func(*unstructured.Unstructured)
		unpause string
	}{
		{
			name:    "spec.paused",
			pause:   func(u *unstructured.Unstructured) { _ = unstructured.SetNestedField(u.Object, true, "spec", "paused") },
			unpause: `{"spec":{"paused":false}}`,
		},
		{
			name:    "paused annotation",
			pause:   func(u *unstructured.Unstructured) { u.SetAnnotations(map[string]string{capi.PausedAnnotation: ""}) },
			unpause: `{"metadata":{"annotations":{"` + capi.PausedAnnotation + `":null}}}`,
		},
	} {
		t.Run(tt.name, func(t *testing.T) {
			ns := env.Namespace(t)
			cluster := kubeenv.NewCluster(env.CAPIVersion, ns, "c1")
			tt.pause(cluster)
			cluster = create(t, restored(t, cluster))
			ms := create(t, restored(t, machineGroup("MachineSet", ns, "c1", "ms-0")))
			create(t, restoredConfigMap(t, ns, "by-label", "c1", controllerOwner("MachineSet", "ms-0")))
			// Labelled with another Cluster, but recording c1 as owner.
			create(t, restoredConfigMap(t, ns, "by-owner", "other", clusterOwner("c1")))

			h := start(t, ns, relink.Options{MinBackoff: time.Hour})
			kubeenv.Consistently(t, 2*time.Second, func() error {
				if w := h.objectWrites(); w > 0 {
					return fmt.Errorf("%d writes while the Cluster is paused:\n%s", w, h.rm.Counter)
				}
				return nil
			})
			if got := h.metric(t, relink.WaitingMetric, configMapGK); got != 0 {
				t.Errorf("paused objects counted as waiting for owners: %v", got)
			}

			if err := env.Client.Patch(t.Context(), cluster, client.RawPatch(types.MergePatchType, []byte(tt.unpause))); err != nil {
				t.Fatal(err)
			}
			kubeenv.Eventually(t, 10*time.Second, linked(t, configMapGVK, ns, "by-label", refTo(ms, true)))
			kubeenv.Eventually(t, 10*time.Second, linked(t, configMapGVK, ns, "by-owner", refTo(cluster, false)))
			if got := h.objectWrites(); got != 2 {
				t.Fatalf("%d writes, want two patches:\n%s", got, h.rm.Counter)
			}
		})
	}
}

func TestLinksOwnersAsTheyAppear(t *testing.T) {
	ns := env.Namespace(t)
	h := start(t, ns, relink.Options{MinBackoff: time.Hour})
	cluster := create(t, restored(t, kubeenv.NewCluster(env.CAPIVersion, ns, "c1")))
	create(t, restoredConfigMap(t, ns, "two-owners", "c1", controllerOwner("MachineDeployment", "md-0"), clusterOwner("c1")))

	// The Cluster is there: linked to it at once, still waiting for the
	// MachineDeployment.
	kubeenv.Eventually(t, 10*time.Second, func() error {
		u := get(t, configMapGVK, ns, "two-owners")
		if !equalRefs(u.GetOwnerReferences(), []metav1.OwnerReference{refTo(cluster, false)}) || u.GetAnnotations()[relink.Annotation] == "" {
			return fmt.Errorf("not half linked: %v %v", u.GetOwnerReferences(), u.GetAnnotations())
		}
		return nil
	})
	md := create(t, restored(t, machineGroup("MachineDeployment", ns, "c1", "md-0")))
	kubeenv.Eventually(t, 10*time.Second, linked(t, configMapGVK, ns, "two-owners", refTo(cluster, false), refTo(md, true)))
	kubeenv.Consistently(t, 500*time.Millisecond, func() error { return nil })
	if got := h.objectWrites(); got != 2 {
		t.Fatalf("%d writes, want two patches:\n%s", got, h.rm.Counter)
	}
}

func TestRecordedVersions(t *testing.T) {
	ns := env.Namespace(t)
	cluster := create(t, restored(t, kubeenv.NewCluster(env.CAPIVersion, ns, "c1")))
	served := clusterOwner("c1")
	served.APIVersion = capi.Group + "/" + capi.V1Beta1
	gone := clusterOwner("c1")
	gone.APIVersion = capi.Group + "/v1alpha4"
	create(t, restoredConfigMap(t, ns, "served", "c1", served))
	create(t, restoredConfigMap(t, ns, "gone", "c1", gone))

	start(t, ns, relink.Options{})
	// A version still served is kept as recorded; one no longer served is
	// replaced by the served one.
	old := refTo(cluster, false)
	old.APIVersion = served.APIVersion
	kubeenv.Eventually(t, 10*time.Second, linked(t, configMapGVK, ns, "served", old))
	kubeenv.Eventually(t, 10*time.Second, linked(t, configMapGVK, ns, "gone", refTo(cluster, false)))
}

func TestOwnersOfKindsNotWatchedAreReadLive(t *testing.T) {
	ns := env.Namespace(t)
	sa := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "owner",
		Labels: map[string]string{velerov1.RestoreNameLabel: restoreName}}}
	if err := env.Client.Create(t.Context(), sa); err != nil {
		t.Fatal(err)
	}
	create(t, restoredConfigMap(t, ns, "by-sa", "c1", relink.OwnerRef{APIVersion: "v1", Kind: "ServiceAccount", Name: "owner"}))
	start(t, ns, relink.Options{})
	kubeenv.Eventually(t, 10*time.Second, linked(t, configMapGVK, ns, "by-sa",
		metav1.OwnerReference{APIVersion: "v1", Kind: "ServiceAccount", Name: "owner", UID: sa.UID}))
}

func TestInvalidAnnotationIsReportedAndLeft(t *testing.T) {
	ns := env.Namespace(t)
	create(t, restored(t, kubeenv.NewCluster(env.CAPIVersion, ns, "c1")))
	bad := restoredConfigMap(t, ns, "bad", "c1")
	bad.SetAnnotations(map[string]string{relink.Annotation: `[{"kind":"Cluster"}]`})
	create(t, bad)
	h := start(t, ns, relink.Options{})
	kubeenv.Eventually(t, 10*time.Second, func() error {
		got := events(t, ns, "bad")
		if len(got) != 1 || !strings.HasPrefix(got[0], "Warning "+relink.ReasonInvalidAnnotation+": ") || !strings.Contains(got[0], "must all be set") {
			return fmt.Errorf("events = %v", got)
		}
		return nil
	})
	if w := h.objectWrites(); w != 0 {
		t.Fatalf("%d writes:\n%s", w, h.rm.Counter)
	}
}
