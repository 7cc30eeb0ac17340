package velerosuite_test

import (
	"testing"

	veleroplugin "github.com/vmware-tanzu/velero/pkg/plugin/velero"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/initlock/initlock/internal/relink"
	"github.com/initlock/initlock/internal/velero"
	"github.com/initlock/initlock/pkg/initlock/capi"
	velerosuite "github.com/initlock/initlock/test/velero"
)

// TestPluginBinaryServesTheActions builds the plugin binary and loads it the
// way the Velero server does, from a plugin folder over go-plugin's gRPC,
// then runs the actions through that connection (pluginManager).
func TestPluginBinaryServesTheActions(t *testing.T) {
	ns := env.Namespace(t)
	mgr := pluginManager(t, pluginDir(t), ns)

	actions, err := mgr.GetRestoreItemActionsV2()
	if err != nil {
		t.Fatalf("listing restore item actions: %v", err)
	}
	var names []string
	for _, a := range actions {
		names = append(names, a.Name())
	}
	if len(names) != 2 || names[0] != velero.ActionName || names[1] != velero.LabelledActionName {
		t.Fatalf("plugin serves %v", names)
	}

	action, err := mgr.GetRestoreItemActionV2(velero.ActionName)
	if err != nil {
		t.Fatal(err)
	}
	sel, err := action.AppliesTo()
	if err != nil || len(sel.IncludedResources) != 1 || sel.IncludedResources[0] != "*.cluster.x-k8s.io" || sel.LabelSelector != "" {
		t.Fatalf("AppliesTo = %+v, %v", sel, err)
	}
	labelled, err := mgr.GetRestoreItemActionV2(velero.LabelledActionName)
	if err != nil {
		t.Fatal(err)
	}
	if sel, err := labelled.AppliesTo(); err != nil || sel.LabelSelector != capi.ClusterNameLabel {
		t.Fatalf("AppliesTo = %+v, %v", sel, err)
	}

	_, backed := velerosuite.OwnedGraph(t, env.Client, ns)
	out, err := action.Execute(&veleroplugin.RestoreItemActionExecuteInput{
		Item: velerosuite.ActionInput(t, env.Client, backed, ns), ItemFromBackup: backed, Restore: velerosuite.RestoreObject(ns),
	})
	if err != nil {
		t.Fatalf("Execute over gRPC: %v", err)
	}
	got := out.UpdatedItem.(*unstructured.Unstructured).GetAnnotations()[relink.Annotation]
	owners, err := relink.Decode(got)
	if err != nil || len(owners) != 2 || owners[1].Name != "ms-0" || !owners[1].IsController() {
		t.Fatalf("annotation over gRPC = %s (%v)", got, err)
	}

	bad := velerosuite.ActionInput(t, env.Client, backed, ns)
	bad.SetAnnotations(map[string]string{relink.Annotation: "[1,"})
	if _, err := action.Execute(&veleroplugin.RestoreItemActionExecuteInput{Item: bad, ItemFromBackup: backed, Restore: velerosuite.RestoreObject(ns)}); err == nil {
		t.Fatal("Execute over gRPC accepted a bad annotation")
	}
}
