//go:build real

package real_test

import (
	"fmt"
	"slices"
	"testing"

	velerov1 "github.com/vmware-tanzu/velero/pkg/apis/velero/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/initlock/initlock/internal/kubeenv/stack"
	"github.com/initlock/initlock/internal/kubeenv/velerosim"
	"github.com/initlock/initlock/internal/kubeenv/wire"
)

// compareUpdates changes the objects a first restore created in realNS and
// simNS alike (a ConfigMap's data and labels, the Cluster's labels, the
// lock deleted), restores the backup over them again with
// --existing-resource-policy=update, by Velero into realNS and by the
// simulator into simNS, and compares the objects: Velero patches each
// existing object towards the backed-up one and labels it with the
// restore, and creates the missing lock. It returns the number of
// differences and a line for the result.
func compareUpdates(t *testing.T, v *stack.Velero, backup string, backed []*unstructured.Unstructured, realNS, simNS string, simCfg *rest.Config) (int, string) {
	t.Helper()
	ctx := t.Context()
	for _, n := range []string{realNS, simNS} {
		changed := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: n, Name: "a-plain"}}
		must(t, source.Client.Patch(ctx, changed, client.RawPatch(types.MergePatchType,
			[]byte(`{"metadata":{"labels":{"added":"since"}},"data":{"k":"changed","extra":"x"}}`))))
		setLabel := &unstructured.Unstructured{}
		setLabel.SetGroupVersionKind(stack.ClusterGVK)
		setLabel.SetNamespace(n)
		setLabel.SetName("fid")
		must(t, source.Client.Patch(ctx, setLabel, client.RawPatch(types.MergePatchType, []byte(`{"metadata":{"labels":{"team":"someone"}}}`))))
		must(t, source.Client.Delete(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: n, Name: "fid" + wire.LockSuffix}}))
	}
	restore, _ := restoreBackup(t, v, backup, "--namespace-mappings", backedNS(backed)+":"+realNS, "--existing-resource-policy", "update")
	simRestore(t, simCfg, velerosim.Options{NamespaceMapping: map[string]string{backedNS(backed): simNS}, BackupName: backup, RestoreName: restore,
		ExistingResourcePolicy: velerov1.PolicyTypeUpdate}, backed)
	diffs, _ := compareRestores(t, backed, realNS, simNS)
	slices.Sort(diffs)
	for _, d := range diffs {
		t.Errorf("difference (--existing-resource-policy=update): %s", d)
	}
	return len(diffs), fmt.Sprintf("with --existing-resource-policy=update over changed objects: %d differences", len(diffs))
}

// backedNS is the namespace the backed-up objects were in.
func backedNS(backed []*unstructured.Unstructured) string {
	for _, b := range backed {
		if b.GetNamespace() != "" {
			return b.GetNamespace()
		}
	}
	return ""
}
