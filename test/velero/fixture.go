package velerosuite

import (
	"encoding/json"
	"testing"

	velerov1 "github.com/vmware-tanzu/velero/pkg/apis/velero/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	corev1client "k8s.io/client-go/kubernetes/typed/core/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/initlock/initlock/internal/kubeenv"
	"github.com/initlock/initlock/internal/kubeenv/velerosim"
	"github.com/initlock/initlock/pkg/initlock/capi"
)

// Backend is an API server the cases run against.
type Backend struct {
	// New returns the backend's API server for t.
	New func(t *testing.T) API
}

// API is one test's view of a Backend.
type API struct {
	// Client reads and writes the API server.
	Client client.Client
	// Counter counts the requests of Client and of the clients of
	// ConfigMaps.
	Counter *kubeenv.Counter
	// Namespace returns a namespace of its own, a new one at each call.
	Namespace func() string
	// ConfigMaps returns the typed client of the ConfigMaps of ns, as
	// velero.Settings reads them.
	ConfigMaps func(ns string) corev1client.ConfigMapInterface
}

// MachineSetUID is the UID of the MachineSet the Machine of OwnedGraph
// records as its controller, which does not exist.
const MachineSetUID = "2b1e0c1e-0000-4000-8000-000000000001"

// OwnedGraph creates, through c, a Cluster c1 in ns and a Machine c1-cp-0
// owned by it and, as its controller, by a MachineSet ms-0 that does not
// exist, and returns the Cluster and the Machine as backed up (read back
// from the API server, as Velero backs it up).
func OwnedGraph(t *testing.T, c client.Client, ns string) (cluster, machine *unstructured.Unstructured) {
	t.Helper()
	cluster = kubeenv.NewCluster(capi.V1Beta2, ns, "c1")
	if err := c.Create(t.Context(), cluster); err != nil {
		t.Fatalf("creating cluster: %v", err)
	}
	m := kubeenv.NewMachine(capi.V1Beta2, ns, "c1", "c1-cp-0")
	m.SetOwnerReferences([]metav1.OwnerReference{
		{APIVersion: cluster.GetAPIVersion(), Kind: "Cluster", Name: "c1", UID: cluster.GetUID()},
		{APIVersion: capi.Group + "/" + capi.V1Beta2, Kind: "MachineSet", Name: "ms-0", UID: MachineSetUID,
			Controller: ptr.To(true), BlockOwnerDeletion: ptr.To(true)},
	})
	if err := c.Create(t.Context(), m); err != nil {
		t.Fatalf("creating machine: %v", err)
	}
	return cluster, readBack(t, c, capi.MachineGVK(capi.V1Beta2), ns, "c1-cp-0")
}

// readBack returns an object as the API server serves it.
func readBack(t *testing.T, c client.Client, gvk schema.GroupVersionKind, ns, name string) *unstructured.Unstructured {
	t.Helper()
	u := &unstructured.Unstructured{}
	u.SetGroupVersionKind(gvk)
	if err := c.Get(t.Context(), client.ObjectKey{Namespace: ns, Name: name}, u); err != nil {
		t.Fatalf("reading %s %s/%s: %v", gvk.Kind, ns, name, err)
	}
	return u
}

// ActionInput returns the item Velero's restore passes to the restore item
// actions for backed (velerosim's ActionInput: server-set metadata,
// ownerReferences and status removed), placed in namespace ns, where the
// restore maps it after the actions.
func ActionInput(t *testing.T, c client.Client, backed *unstructured.Unstructured, ns string) *unstructured.Unstructured {
	t.Helper()
	u, err := velerosim.NewForClient(c, velerosim.Options{}).ActionInput(backed)
	if err != nil {
		t.Fatal(err)
	}
	u.SetNamespace(ns)
	return u
}

// RestoreObject is the restore the actions are given, of namespace ns.
func RestoreObject(ns string) *velerov1.Restore {
	return &velerov1.Restore{
		ObjectMeta: metav1.ObjectMeta{Namespace: "velero", Name: "restore-1"},
		Spec:       velerov1.RestoreSpec{BackupName: "backup-1", IncludedNamespaces: []string{ns}},
	}
}

func equality(a, b *unstructured.Unstructured) bool {
	ja, _ := json.Marshal(a.Object)
	jb, _ := json.Marshal(b.Object)
	return string(ja) == string(jb)
}
