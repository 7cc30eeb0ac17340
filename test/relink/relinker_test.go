package relinksuite_test

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	velerov1 "github.com/vmware-tanzu/velero/pkg/apis/velero/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	"github.com/initlock/initlock/internal/kubeenv"
	"github.com/initlock/initlock/internal/relink"
	"github.com/initlock/initlock/pkg/initlock/capi"
)

var configMapGK = schema.GroupKind{Kind: "ConfigMap"}

func TestRelinksToTheOwnersCurrentUIDs(t *testing.T) {
	ns := env.Namespace(t)
	cluster := create(t, restored(t, kubeenv.NewCluster(env.CAPIVersion, ns, "c1")))
	ms := create(t, restored(t, newMachineSet(ns, "c1", "ms-0")))
	create(t, restoredConfigMap(t, ns, "c1-lock", "c1", clusterOwner("c1")))
	machine := kubeenv.NewMachine(env.CAPIVersion, ns, "c1", "m-0")
	machine.SetAnnotations(map[string]string{relink.Annotation: relink.Encode([]relink.OwnerRef{controllerOwner("MachineSet", "ms-0")})})
	create(t, restored(t, machine))
	plain := restoredConfigMap(t, ns, "plain", "c1")
	plain.SetAnnotations(nil)
	create(t, plain)

	h := start(t, ns, relink.Options{})
	kubeenv.Eventually(t, 30*time.Second, linked(t, configMapGVK, ns, "c1-lock", refTo(cluster, false)))
	kubeenv.Eventually(t, 30*time.Second, linked(t, capiGVK("Machine"), ns, "m-0", refTo(ms, true)))

	// Then nothing more is written.
	kubeenv.Consistently(t, time.Second, func() error { return nil })
	patches := h.patchesPerObject(t)
	want := map[string]int{
		"/v1 configmaps " + ns + "/c1-lock":                                1,
		"cluster.x-k8s.io/" + env.CAPIVersion + " machines " + ns + "/m-0": 1,
	}
	if fmt.Sprint(patches) != fmt.Sprint(want) {
		t.Fatalf("patches = %v, want %v", patches, want)
	}
	if got := h.metric(t, relink.LinkedMetric, configMapGK); got != 1 {
		t.Errorf("%s{ConfigMap} = %v, want 1", relink.LinkedMetric, got)
	}
	if got := events(t, ns, "c1-lock"); len(got) != 0 {
		t.Errorf("events = %v", got)
	}
}

func TestWaitsForAnOwnerAndLinksWhenItAppears(t *testing.T) {
	ns := env.Namespace(t)
	// A long backoff: only the watch on Clusters can bring the link in time.
	h := start(t, ns, relink.Options{MinBackoff: time.Hour})
	create(t, restoredConfigMap(t, ns, "c1-kubeconfig", "c1", clusterOwner("c1")))

	kubeenv.Eventually(t, 10*time.Second, func() error {
		if got := h.metric(t, relink.WaitingMetric, configMapGK); got != 1 {
			return fmt.Errorf("waiting gauge = %v", got)
		}
		return nil
	})
	kubeenv.Consistently(t, time.Second, func() error {
		if refs := get(t, configMapGVK, ns, "c1-kubeconfig").GetOwnerReferences(); len(refs) > 0 {
			return fmt.Errorf("linked without an owner: %v", refs)
		}
		return nil
	})
	if w := h.objectWrites(); w != 0 {
		t.Fatalf("%d writes while waiting:\n%s", w, h.rm.Counter)
	}

	cluster := create(t, restored(t, kubeenv.NewCluster(env.CAPIVersion, ns, "c1")))
	kubeenv.Eventually(t, 10*time.Second, linked(t, configMapGVK, ns, "c1-kubeconfig", refTo(cluster, false)))
	kubeenv.Eventually(t, 5*time.Second, func() error {
		if got := h.metric(t, relink.WaitingMetric, configMapGK); got != 0 {
			return fmt.Errorf("waiting gauge = %v", got)
		}
		return nil
	})
	if got := h.objectWrites(); got != 1 {
		t.Fatalf("%d writes, want one patch:\n%s", got, h.rm.Counter)
	}
}

func TestAnOwnerThatNeverReturns(t *testing.T) {
	ns := env.Namespace(t)
	h := start(t, ns, relink.Options{WarnAfter: -1})
	create(t, restoredConfigMap(t, ns, "orphan", "gone", clusterOwner("gone")))

	kubeenv.Eventually(t, 10*time.Second, func() error {
		got := events(t, ns, "orphan")
		if len(got) != 1 || !strings.HasPrefix(got[0], "Warning "+relink.ReasonOwnerNotFound+": Owner Cluster cluster.x-k8s.io/"+env.CAPIVersion+" gone not found") {
			return fmt.Errorf("events = %v", got)
		}
		return nil
	})
	if got := h.metric(t, relink.WaitingMetric, configMapGK); got != 1 {
		t.Errorf("waiting gauge = %v, want 1", got)
	}
	kubeenv.Consistently(t, 2*time.Second, func() error {
		u := get(t, configMapGVK, ns, "orphan")
		if len(u.GetOwnerReferences()) > 0 || u.GetAnnotations()[relink.Annotation] == "" {
			return fmt.Errorf("orphan changed: %v %v", u.GetOwnerReferences(), u.GetAnnotations())
		}
		return nil
	})
	if w := h.objectWrites(); w != 0 {
		t.Fatalf("%d writes:\n%s", w, h.rm.Counter)
	}
	if got := events(t, ns, "orphan"); len(got) != 1 {
		t.Fatalf("the warning was repeated: %v", got)
	}
	if w := h.relinker.Waiting(); len(w) != 1 || w[0].Name != "orphan" {
		t.Fatalf("Waiting = %v", w)
	}
}

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
			ms := create(t, restored(t, newMachineSet(ns, "c1", "ms-0")))
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

func TestKeepsCorrectReferencesAndCorrectsStaleOnes(t *testing.T) {
	ns := env.Namespace(t)
	cluster := create(t, restored(t, kubeenv.NewCluster(env.CAPIVersion, ns, "c1")))
	ms := create(t, restored(t, newMachineSet(ns, "c1", "ms-0")))
	other := create(t, restoredConfigMap(t, ns, "other", "c1"))

	correct := refTo(cluster, false)
	stale := refTo(ms, false)
	stale.UID = "00000000-0000-4000-8000-000000000000"
	unrecorded := metav1.OwnerReference{APIVersion: "v1", Kind: "ConfigMap", Name: "other", UID: other.GetUID(), Controller: ptr.To(true)}
	cm := restoredConfigMap(t, ns, "mixed", "c1", clusterOwner("c1"), controllerOwner("MachineSet", "ms-0"))
	cm.SetOwnerReferences([]metav1.OwnerReference{correct, stale, unrecorded})
	create(t, cm)

	start(t, ns, relink.Options{})
	// The MachineSet reference gets the current UID (in place, or
	// appended when the garbage collector dropped the dangling reference
	// first); it was recorded as controller, but the object has another
	// controller, so it is linked without controller.
	fixed := refTo(ms, false)
	fixed.BlockOwnerDeletion = ptr.To(true)
	kubeenv.Eventually(t, 10*time.Second, func() error {
		u := get(t, configMapGVK, ns, "mixed")
		got := u.GetOwnerReferences()
		slices.SortFunc(got, func(a, b metav1.OwnerReference) int { return strings.Compare(a.Kind, b.Kind) })
		if _, ok := u.GetAnnotations()[relink.Annotation]; ok || !equalRefs(got, []metav1.OwnerReference{correct, unrecorded, fixed}) {
			return fmt.Errorf("ownerReferences = %v, annotations %v", got, u.GetAnnotations())
		}
		return nil
	})
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
	md := create(t, restored(t, newMachineDeployment(ns, "c1", "md-0")))
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

func TestNothingToDoMeansNoWrites(t *testing.T) {
	ns := env.Namespace(t)
	cluster := create(t, restored(t, kubeenv.NewCluster(env.CAPIVersion, ns, "c1")))
	for i := range 20 {
		cm := restoredConfigMap(t, ns, fmt.Sprintf("cm-%d", i), "c1")
		cm.SetAnnotations(nil)
		cm.SetOwnerReferences([]metav1.OwnerReference{refTo(cluster, false)})
		create(t, cm)
	}
	h := start(t, ns, relink.Options{})
	kubeenv.Consistently(t, time.Second, func() error {
		if w := h.objectWrites(); w != 0 {
			return fmt.Errorf("%d writes:\n%s", w, h.rm.Counter)
		}
		return nil
	})
}

func TestConfiguredKindsMustBeServed(t *testing.T) {
	kinds, err := relink.ParseKinds("Machine.cluster.x-k8s.io,DockerMachine.infrastructure.cluster.x-k8s.io")
	if err != nil {
		t.Fatal(err)
	}
	mgr, err := ctrl.NewManager(env.Config, ctrl.Options{
		Scheme:                 kubeenv.Scheme(),
		Metrics:                metricsserver.Options{BindAddress: "0"},
		HealthProbeBindAddress: "0",
	})
	if err != nil {
		t.Fatal(err)
	}
	err = relink.New(relink.Options{Kinds: kinds, Registry: prometheus.NewRegistry()}).SetupWithManager(t.Context(), mgr)
	if err == nil || !strings.Contains(err.Error(), "kind DockerMachine.infrastructure.cluster.x-k8s.io is not served") {
		t.Fatalf("SetupWithManager = %v, want an error naming the kind", err)
	}
}
