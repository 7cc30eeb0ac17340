package lock

import (
	"fmt"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/event"

	"github.com/initlock/initlock/internal/kubeenv"
	"github.com/initlock/initlock/internal/kubeenv/wire"
	"github.com/initlock/initlock/pkg/initlock/capi"
)

// The watches' mappings and predicates (setup.go).

func TestLockToClusters(t *testing.T) {
	const ns = "default"
	for _, tc := range []struct {
		name   string
		labels map[string]string
		cmName string
		want   []string
	}{
		{"lock", map[string]string{capi.ClusterNameLabel: "c1"}, "c1-lock", []string{"c1"}},
		{"labelled for another cluster", map[string]string{capi.ClusterNameLabel: "c2"}, "c1-lock", []string{"c2", "c1"}},
		{"other labelled ConfigMap", map[string]string{capi.ClusterNameLabel: "c1"}, "c1-kubeconfig", []string{"c1"}},
		{"bare suffix", nil, "-lock", nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: tc.cmName, Labels: tc.labels}}
			var got []string
			for _, r := range lockToClusters(t.Context(), cm) {
				if r.Namespace != ns {
					t.Errorf("namespace %q", r.Namespace)
				}
				got = append(got, r.Name)
			}
			if fmt.Sprint(got) != fmt.Sprint(tc.want) {
				t.Errorf("requests %v, want %v", got, tc.want)
			}
		})
	}
}

func TestClusterChanged(t *testing.T) {
	const grant = `{"machineName":"m1","machineUID":"m1-uid","clusterUID":"uid","token":"t1"}`
	base := func() *unstructured.Unstructured {
		u := kubeenv.NewCluster(capi.V1Beta2, "default", "c1")
		u.SetUID("uid")
		u.SetResourceVersion("1")
		u.SetAnnotations(map[string]string{wire.GrantAnnotation: grant})
		return u
	}
	p := clusterChanged()
	for _, tc := range []struct {
		name   string
		mutate func(*unstructured.Unstructured)
		want   bool
	}{
		{"resync", func(u *unstructured.Unstructured) { u.SetResourceVersion("1") }, true},
		{"status churn, with a grant recorded", func(u *unstructured.Unstructured) {
			u.Object["status"] = map[string]any{"phase": "Provisioning"}
		}, false},
		{"grant register written", func(u *unstructured.Unstructured) {
			u.SetAnnotations(map[string]string{wire.GrantAnnotation: `{"machineName":"m1","machineUID":"m1-uid","clusterUID":"uid","token":"t2"}`})
		}, true},
		{"grant register emptied", func(u *unstructured.Unstructured) { u.SetAnnotations(nil) }, true},
		{"another annotation written", func(u *unstructured.Unstructured) {
			u.SetAnnotations(map[string]string{wire.GrantAnnotation: grant, "example.com/note": "x"})
		}, true},
		{"paused", func(u *unstructured.Unstructured) {
			u.SetAnnotations(map[string]string{wire.GrantAnnotation: grant, capi.PausedAnnotation: "true"})
		}, true},
		{"initialised", func(u *unstructured.Unstructured) {
			u.Object["status"] = map[string]any{"initialization": map[string]any{"controlPlaneInitialized": true}}
		}, true},
		{"deleting", func(u *unstructured.Unstructured) { u.SetDeletionTimestamp(&metav1.Time{Time: time.Now()}) }, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			updated := base()
			updated.SetResourceVersion("2") // a change but for a resync
			tc.mutate(updated)
			if got := p.Update(event.UpdateEvent{ObjectOld: base(), ObjectNew: updated}); got != tc.want {
				t.Errorf("Update = %t, want %t", got, tc.want)
			}
		})
	}
}
