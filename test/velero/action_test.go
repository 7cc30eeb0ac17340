package velerosuite_test

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"

	velerov1 "github.com/vmware-tanzu/velero/pkg/apis/velero/v1"
	veleroplugin "github.com/vmware-tanzu/velero/pkg/plugin/velero"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/initlock/initlock/internal/kubeenv"
	"github.com/initlock/initlock/internal/kubeenv/velerosim"
	"github.com/initlock/initlock/internal/relink"
	"github.com/initlock/initlock/internal/velero"
	"github.com/initlock/initlock/pkg/initlock/capi"
)

// readBack returns obj as the API server serves it, as Velero backs it up.
func readBack(t *testing.T, gvk schema.GroupVersionKind, ns, name string) *unstructured.Unstructured {
	t.Helper()
	u := &unstructured.Unstructured{}
	u.SetGroupVersionKind(gvk)
	if err := env.Client.Get(t.Context(), client.ObjectKey{Namespace: ns, Name: name}, u); err != nil {
		t.Fatalf("reading %s %s/%s: %v", gvk.Kind, ns, name, err)
	}
	return u
}

// resetForRestore returns the item Velero's restore passes to the restore
// item actions for backed (velerosim's ActionInput: server-set metadata,
// ownerReferences and status removed), placed in namespace ns, where the
// restore maps it after the actions.
func resetForRestore(t *testing.T, backed *unstructured.Unstructured, ns string) *unstructured.Unstructured {
	t.Helper()
	r, err := velerosim.New(env.Config, velerosim.Options{})
	if err != nil {
		t.Fatal(err)
	}
	u, err := r.ActionInput(backed)
	if err != nil {
		t.Fatal(err)
	}
	u.SetNamespace(ns)
	return u
}

func restoreObject(ns string) *velerov1.Restore {
	return &velerov1.Restore{
		ObjectMeta: metav1.ObjectMeta{Namespace: "velero", Name: "restore-1"},
		Spec:       velerov1.RestoreSpec{BackupName: "backup-1", IncludedNamespaces: []string{ns}},
	}
}

// machineSetUID is the UID of the MachineSet ownedGraph's Machine records
// as owner, which does not exist.
const machineSetUID = "2b1e0c1e-0000-4000-8000-000000000001"

// ownedGraph creates a Cluster, a MachineSet owned by it and a Machine
// owned by the MachineSet as a controller, and returns the Machine as
// backed up.
func ownedGraph(t *testing.T, ns string) (cluster, machine *unstructured.Unstructured) {
	t.Helper()
	ctx := t.Context()
	v := env.CAPIVersion
	cluster = kubeenv.NewCluster(v, ns, "c1")
	if err := env.Client.Create(ctx, cluster); err != nil {
		t.Fatalf("creating cluster: %v", err)
	}
	m := kubeenv.NewMachine(v, ns, "c1", "c1-cp-0")
	m.SetOwnerReferences([]metav1.OwnerReference{
		{APIVersion: cluster.GetAPIVersion(), Kind: "Cluster", Name: "c1", UID: cluster.GetUID()},
		{APIVersion: capi.Group + "/" + v, Kind: "MachineSet", Name: "ms-0", UID: machineSetUID,
			Controller: ptr.To(true), BlockOwnerDeletion: ptr.To(true)},
	})
	if err := env.Client.Create(ctx, m); err != nil {
		t.Fatalf("creating machine: %v", err)
	}
	return cluster, readBack(t, capi.MachineGVK(v), ns, "c1-cp-0")
}

func TestExecuteRecordsOwnerReferencesWithTheirUIDs(t *testing.T) {
	ctx := t.Context()
	ns := env.Namespace(t)
	target := env.Namespace(t)
	cluster, backed := ownedGraph(t, ns)

	action := velero.NewAction(velero.DefaultConfig(), false, nil)
	item := resetForRestore(t, backed, target)
	out, err := action.Execute(&veleroplugin.RestoreItemActionExecuteInput{
		Item: item, ItemFromBackup: backed, Restore: restoreObject(ns),
	})
	if err != nil {
		t.Fatalf("Execute: %v", err)
	}
	got := out.UpdatedItem.(*unstructured.Unstructured)
	value := got.GetAnnotations()[relink.Annotation]
	v := env.CAPIVersion
	want := `{"version":2,"owners":[{"apiVersion":"cluster.x-k8s.io/` + v + `","kind":"Cluster","name":"c1","uid":"` + string(cluster.GetUID()) + `"},` +
		`{"apiVersion":"cluster.x-k8s.io/` + v + `","kind":"MachineSet","name":"ms-0","uid":"` + machineSetUID + `","controller":true,"blockOwnerDeletion":true}]}`
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
	if err := env.Client.Create(ctx, restored); err != nil {
		t.Fatalf("restoring the item: %v", err)
	}
	if ann := readBack(t, backed.GroupVersionKind(), target, backed.GetName()).GetAnnotations()[relink.Annotation]; ann != want {
		t.Fatalf("restored annotation = %s", ann)
	}
}

func equality(a, b *unstructured.Unstructured) bool {
	ja, _ := json.Marshal(a.Object)
	jb, _ := json.Marshal(b.Object)
	return string(ja) == string(jb)
}

func TestExecuteTable(t *testing.T) {
	ns := env.Namespace(t)
	cluster, backedMachine := ownedGraph(t, ns)
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "unowned", Labels: map[string]string{capi.ClusterNameLabel: "c1"}}}
	if err := env.Client.Create(t.Context(), cm); err != nil {
		t.Fatal(err)
	}
	backedCM := readBack(t, corev1.SchemeGroupVersion.WithKind("ConfigMap"), ns, "unowned")
	v := env.CAPIVersion
	owners := `{"apiVersion":"cluster.x-k8s.io/` + v + `","kind":"Cluster","name":"c1","uid":"` + string(cluster.GetUID()) + `"},` +
		`{"apiVersion":"cluster.x-k8s.io/` + v + `","kind":"MachineSet","name":"ms-0","uid":"` + machineSetUID + `","controller":true,"blockOwnerDeletion":true}`

	withAnnotation := func(u *unstructured.Unstructured, value string) *unstructured.Unstructured {
		u = u.DeepCopy()
		u.SetAnnotations(map[string]string{relink.Annotation: value, "keep": "me"})
		return u
	}
	tests := []struct {
		name      string
		backed    *unstructured.Unstructured
		item      func(*unstructured.Unstructured) *unstructured.Unstructured
		want      string // annotation; "" means the item is returned untouched
		wantErrIn []string
	}{
		{
			name:   "no ownerReferences: untouched",
			backed: backedCM,
			item:   func(u *unstructured.Unstructured) *unstructured.Unstructured { return resetForRestore(t, u, ns) },
		},
		{
			name:   "no ownerReferences and a bad annotation: untouched",
			backed: withAnnotation(backedCM, "{not json"),
			item:   func(u *unstructured.Unstructured) *unstructured.Unstructured { return resetForRestore(t, u, ns) },
		},
		{
			name:   "pending owners from an earlier restore, in the first format, are kept after the current ones",
			backed: backedMachine,
			item: func(u *unstructured.Unstructured) *unstructured.Unstructured {
				return withAnnotation(resetForRestore(t, u, ns),
					`[{"apiVersion":"cluster.x-k8s.io/v1beta1","kind":"Cluster","name":"c1"},{"apiVersion":"infrastructure.cluster.x-k8s.io/v1beta1","kind":"DockerCluster","name":"c1"}]`)
			},
			want: `{"version":2,"owners":[` + owners + `,` +
				`{"apiVersion":"infrastructure.cluster.x-k8s.io/v1beta1","kind":"DockerCluster","name":"c1"}]}`,
		},
		{
			name:   "pending owners in the second format keep their UIDs",
			backed: backedMachine,
			item: func(u *unstructured.Unstructured) *unstructured.Unstructured {
				return withAnnotation(resetForRestore(t, u, ns),
					`{"version":2,"owners":[{"apiVersion":"infrastructure.cluster.x-k8s.io/v1beta1","kind":"DockerCluster","name":"c1","uid":"u-dc"}]}`)
			},
			want: `{"version":2,"owners":[` + owners + `,` +
				`{"apiVersion":"infrastructure.cluster.x-k8s.io/v1beta1","kind":"DockerCluster","name":"c1","uid":"u-dc"}]}`,
		},
		{
			name:   "an item run through the action twice keeps one record per owner",
			backed: backedMachine,
			item: func(u *unstructured.Unstructured) *unstructured.Unstructured {
				return withAnnotation(resetForRestore(t, u, ns), relink.Encode(relink.FromOwnerReferences(u.GetOwnerReferences())))
			},
			want: `{"version":2,"owners":[` + owners + `]}`,
		},
		{
			name:   "bad JSON in the annotation names the object",
			backed: backedMachine,
			item: func(u *unstructured.Unstructured) *unstructured.Unstructured {
				return withAnnotation(resetForRestore(t, u, ns), "{not json")
			},
			wantErrIn: []string{"machine.cluster.x-k8s.io " + ns + "/c1-cp-0", relink.Annotation, "not a JSON object of owner references"},
		},
		{
			name:   "an owner without a name names the object",
			backed: backedMachine,
			item: func(u *unstructured.Unstructured) *unstructured.Unstructured {
				return withAnnotation(resetForRestore(t, u, ns), `[{"apiVersion":"v1","kind":"ConfigMap"}]`)
			},
			wantErrIn: []string{"machine.cluster.x-k8s.io " + ns + "/c1-cp-0", "must all be set"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			item := tt.item(tt.backed)
			before := item.DeepCopy()
			out, err := velero.NewAction(velero.DefaultConfig(), false, nil).Execute(&veleroplugin.RestoreItemActionExecuteInput{
				Item: item, ItemFromBackup: tt.backed, Restore: restoreObject(ns),
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
