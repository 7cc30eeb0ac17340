package velerosuite

import (
	"errors"
	"strings"
	"testing"

	veleroplugin "github.com/vmware-tanzu/velero/pkg/plugin/velero"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/initlock/initlock/internal/kubeenv"
	"github.com/initlock/initlock/internal/relink"
	"github.com/initlock/initlock/internal/velero"
	"github.com/initlock/initlock/pkg/initlock/capi"
)

// Execute runs the cases of the action's Execute on items backed up from,
// and restored into, the backend: the owners recorded with their UIDs,
// owners already recorded kept, items without owners untouched, and
// annotations that cannot be read refused with an error naming the item.
func Execute(t *testing.T, b Backend) {
	t.Run("records owner references with their UIDs", func(t *testing.T) { recordsOwnerReferences(t, b) })
	t.Run("table", func(t *testing.T) { executeTable(t, b) })
	t.Run("a lock's marks are taken off", func(t *testing.T) { dropsLockMarks(t, b) })
}

// dropsLockMarks backs up a held lock that carries every mark of a live
// lock (a release stopped between its mark and its delete, a move that
// failed, a Cluster missing) and checks that the action takes them off the
// restored item, owned or not, and leaves the annotations of the same names
// alone on another ConfigMap and on locks whose record names no Machine.
func dropsLockMarks(t *testing.T, b Backend) {
	ctx := t.Context()
	api := b.New(t)
	ns := api.Namespace()
	cluster, _ := OwnedGraph(t, api.Client, ns)
	marks := map[string]string{
		"initlock.dev/releasable": "uid-of-the-live-lock", "initlock.dev/release-started": "2026-12-06T10:00:00Z",
		"initlock.dev/cluster-absent-since":           "2026-12-06T10:00:00Z uid-of-the-live-lock",
		"clusterctl.cluster.x-k8s.io/delete-for-move": "", "keep": "me",
	}
	owned := kubeenv.NewLock(ns, "c1", "c1-cp-0", nil)
	owned.Annotations = marks
	owned.OwnerReferences = []metav1.OwnerReference{{APIVersion: cluster.GetAPIVersion(), Kind: "Cluster", Name: "c1", UID: cluster.GetUID()}}
	unowned := kubeenv.NewLock(ns, "c2", "c2-cp-0", nil)
	unowned.Annotations = marks
	other := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "settings", Annotations: marks,
		Labels: map[string]string{capi.ClusterNameLabel: "c1"}}, Data: map[string]string{"lock-information": `{"machineName":"m"}`}}
	// Locks of the name, label and key whose record names no Machine
	// (KubeKey's; one not JSON) are not init locks: the guard does not
	// hold them and the action leaves their annotations alone.
	kubekey := kubeenv.NewLock(ns, "c3", "c3-cp-0", nil)
	kubekey.Annotations, kubekey.Data["lock-information"] = marks, `{"kkInstanceName":"c3-cp-0"}`
	corrupt := kubeenv.NewLock(ns, "c4", "c4-cp-0", nil)
	corrupt.Annotations, corrupt.Data["lock-information"] = marks, `not json`
	// A record whose key is escaped is the same record: a lock.
	escaped := kubeenv.NewLock(ns, "c5", "c5-cp-0", nil)
	escaped.Annotations, escaped.Data["lock-information"] = marks, `{"machine\u004eame":"c5-cp-0"}`
	for _, cm := range []*corev1.ConfigMap{owned, unowned, other, kubekey, corrupt, escaped} {
		if err := api.Client.Create(ctx, cm); err != nil {
			t.Fatal(err)
		}
	}
	for _, tt := range []struct {
		name      string
		marksGone bool
		relinked  bool
	}{{"c1-lock", true, true}, {"c2-lock", true, false}, {"settings", false, false}, {"c3-lock", false, false}, {"c4-lock", false, false}, {"c5-lock", true, false}} {
		backed := readBack(t, api.Client, corev1.SchemeGroupVersion.WithKind("ConfigMap"), ns, tt.name)
		item := ActionInput(t, api.Client, backed, ns)
		out, err := velero.NewAction(velero.DefaultConfig(), false, nil).Execute(&veleroplugin.RestoreItemActionExecuteInput{
			Item: item, ItemFromBackup: backed, Restore: RestoreObject(ns),
		})
		if err != nil {
			t.Fatalf("%s: Execute: %v", tt.name, err)
		}
		got := out.UpdatedItem.(*unstructured.Unstructured).GetAnnotations()
		for k := range marks {
			_, kept := got[k]
			if want := k == "keep" || !tt.marksGone; kept != want {
				t.Errorf("%s: annotation %s kept %t, want %t (%v)", tt.name, k, kept, want, got)
			}
		}
		if _, ok := got[relink.Annotation]; ok != tt.relinked {
			t.Errorf("%s: owners recorded %t, want %t", tt.name, ok, tt.relinked)
		}
		if !tt.marksGone && !tt.relinked && out.UpdatedItem != runtime.Unstructured(item) {
			t.Errorf("%s: not returned untouched", tt.name)
		}
	}
}

func recordsOwnerReferences(t *testing.T, b Backend) {
	ctx := t.Context()
	api := b.New(t)
	ns, target := api.Namespace(), api.Namespace()
	cluster, backed := OwnedGraph(t, api.Client, ns)

	action := velero.NewAction(velero.DefaultConfig(), false, nil)
	item := ActionInput(t, api.Client, backed, target)
	out, err := action.Execute(&veleroplugin.RestoreItemActionExecuteInput{
		Item: item, ItemFromBackup: backed, Restore: RestoreObject(ns),
	})
	if err != nil {
		t.Fatalf("Execute: %v", err)
	}
	got := out.UpdatedItem.(*unstructured.Unstructured)
	value := got.GetAnnotations()[relink.Annotation]
	v := capi.V1Beta2
	want := `{"version":2,"owners":[{"apiVersion":"cluster.x-k8s.io/` + v + `","kind":"Cluster","name":"c1","uid":"` + string(cluster.GetUID()) + `"},` +
		`{"apiVersion":"cluster.x-k8s.io/` + v + `","kind":"MachineSet","name":"ms-0","uid":"` + MachineSetUID + `","controller":true,"blockOwnerDeletion":true}]}`
	if value != want {
		t.Fatalf("annotation = %s\nwant        %s", value, want)
	}
	if out.SkipRestore || len(out.AdditionalItems) > 0 || out.OperationID != "" {
		t.Fatalf("Execute asked for more than the item: %+v", out)
	}
	if len(item.GetAnnotations()) != 0 {
		t.Fatalf("Execute changed its input item: %v", item.GetAnnotations())
	}
	// Only the annotation differs from what Velero would have restored.
	got.SetAnnotations(nil)
	if !equality(got, item) {
		t.Fatalf("Execute changed more than the annotation:\n%v\n%v", got.Object, item.Object)
	}
	// The item is restorable as it is.
	restored := out.UpdatedItem.(*unstructured.Unstructured).DeepCopy()
	restored.SetAnnotations(map[string]string{relink.Annotation: value})
	if err := api.Client.Create(ctx, restored); err != nil {
		t.Fatalf("restoring the item: %v", err)
	}
	if ann := readBack(t, api.Client, backed.GroupVersionKind(), target, backed.GetName()).GetAnnotations()[relink.Annotation]; ann != want {
		t.Fatalf("restored annotation = %s", ann)
	}
}

func executeTable(t *testing.T, b Backend) {
	api := b.New(t)
	ns := api.Namespace()
	cluster, backedMachine := OwnedGraph(t, api.Client, ns)
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "unowned", Labels: map[string]string{capi.ClusterNameLabel: "c1"}}}
	if err := api.Client.Create(t.Context(), cm); err != nil {
		t.Fatal(err)
	}
	backedCM := readBack(t, api.Client, corev1.SchemeGroupVersion.WithKind("ConfigMap"), ns, "unowned")
	v := capi.V1Beta2
	owners := `{"apiVersion":"cluster.x-k8s.io/` + v + `","kind":"Cluster","name":"c1","uid":"` + string(cluster.GetUID()) + `"},` +
		`{"apiVersion":"cluster.x-k8s.io/` + v + `","kind":"MachineSet","name":"ms-0","uid":"` + MachineSetUID + `","controller":true,"blockOwnerDeletion":true}`

	withAnnotation := func(u *unstructured.Unstructured, value string) *unstructured.Unstructured {
		u = u.DeepCopy()
		u.SetAnnotations(map[string]string{relink.Annotation: value, "keep": "me"})
		return u
	}
	tests := []struct {
		name       string
		backed     *unstructured.Unstructured
		annotation string // set on the item, with "keep", when not empty
		want       string // annotation; "" means the item is returned untouched
		wantErrIn  []string
	}{
		{name: "no ownerReferences: untouched", backed: backedCM},
		{name: "no ownerReferences and a bad annotation: untouched", backed: withAnnotation(backedCM, "{not json")},
		{
			name: "pending owners from an earlier restore, in the first format, are kept after the current ones", backed: backedMachine,
			annotation: `[{"apiVersion":"cluster.x-k8s.io/v1beta1","kind":"Cluster","name":"c1"},{"apiVersion":"infrastructure.cluster.x-k8s.io/v1beta1","kind":"DockerCluster","name":"c1"}]`,
			want: `{"version":2,"owners":[` + owners + `,` +
				`{"apiVersion":"infrastructure.cluster.x-k8s.io/v1beta1","kind":"DockerCluster","name":"c1"}]}`,
		},
		{
			name: "pending owners in the second format keep their UIDs", backed: backedMachine,
			annotation: `{"version":2,"owners":[{"apiVersion":"infrastructure.cluster.x-k8s.io/v1beta1","kind":"DockerCluster","name":"c1","uid":"u-dc"}]}`,
			want: `{"version":2,"owners":[` + owners + `,` +
				`{"apiVersion":"infrastructure.cluster.x-k8s.io/v1beta1","kind":"DockerCluster","name":"c1","uid":"u-dc"}]}`,
		},
		{
			name: "an item run through the action twice keeps one record per owner", backed: backedMachine,
			annotation: relink.Encode(relink.FromOwnerReferences(backedMachine.GetOwnerReferences())),
			want:       `{"version":2,"owners":[` + owners + `]}`,
		},
		{
			name: "bad JSON in the annotation names the object", backed: backedMachine, annotation: "{not json",
			wantErrIn: []string{"machine.cluster.x-k8s.io " + ns + "/c1-cp-0", relink.Annotation, "not a JSON object of owner references"},
		},
		{
			name: "an owner without a name names the object", backed: backedMachine, annotation: `[{"apiVersion":"v1","kind":"ConfigMap"}]`,
			wantErrIn: []string{"machine.cluster.x-k8s.io " + ns + "/c1-cp-0", "must all be set"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			item := ActionInput(t, api.Client, tt.backed, ns)
			if tt.annotation != "" {
				item = withAnnotation(item, tt.annotation)
			}
			before := item.DeepCopy()
			out, err := velero.NewAction(velero.DefaultConfig(), false, nil).Execute(&veleroplugin.RestoreItemActionExecuteInput{
				Item: item, ItemFromBackup: tt.backed, Restore: RestoreObject(ns),
			})
			if len(tt.wantErrIn) > 0 {
				if err == nil {
					t.Fatalf("Execute succeeded, want an error")
				}
				if !errors.Is(err, relink.ErrInvalidAnnotation) {
					t.Errorf("error %v does not wrap ErrInvalidAnnotation", err)
				}
				for _, s := range tt.wantErrIn {
					if !strings.Contains(err.Error(), s) {
						t.Errorf("error %q does not contain %q", err, s)
					}
				}
				return
			}
			if err != nil {
				t.Fatalf("Execute: %v", err)
			}
			if tt.want == "" {
				if out.UpdatedItem != runtime.Unstructured(item) || !equality(item, before) {
					t.Fatalf("item not returned untouched")
				}
				return
			}
			got := out.UpdatedItem.(*unstructured.Unstructured).GetAnnotations()
			if got[relink.Annotation] != tt.want {
				t.Errorf("annotation = %s\nwant        %s", got[relink.Annotation], tt.want)
			}
			if got["keep"] != "me" {
				t.Errorf("other annotations lost: %v", got)
			}
		})
	}
}
