package velerosuite_test

import (
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/sirupsen/logrus"
	"github.com/vmware-tanzu/velero/pkg/plugin/clientmgmt"
	"github.com/vmware-tanzu/velero/pkg/plugin/clientmgmt/process"
	veleroplugin "github.com/vmware-tanzu/velero/pkg/plugin/velero"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/initlock/initlock/internal/relink"
	"github.com/initlock/initlock/internal/velero"
	"github.com/initlock/initlock/pkg/initlock/capi"
	velerosuite "github.com/initlock/initlock/test/velero"
)

// pluginDir builds velero-plugin-initlock into a folder of its own, as
// Velero's plugin folder holds it.
func pluginDir(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	out, err := exec.CommandContext(t.Context(), "go", "build", "-o", filepath.Join(dir, "velero-plugin-initlock"),
		"github.com/initlock/initlock/cmd/velero-plugin-initlock").CombinedOutput()
	if err != nil {
		t.Fatalf("building the plugin: %v\n%s", err, out)
	}
	return dir
}

// pluginManager loads the plugin binary of dir as the Velero server does, its
// settings read in namespace ns with the admin kubeconfig, given to it in
// the environment as Velero's Deployment gives VELERO_NAMESPACE.
func pluginManager(t *testing.T, dir, ns string) clientmgmt.Manager {
	t.Helper()
	kubeconfig, err := env.WriteKubeconfig("velero", []string{"system:masters"})
	if err != nil {
		t.Fatal(err)
	}
	t.Setenv("KUBECONFIG", kubeconfig)
	t.Setenv("VELERO_NAMESPACE", ns)
	log := quietLogger()
	registry := process.NewRegistry(dir, log, logrus.InfoLevel)
	if err := registry.DiscoverPlugins(); err != nil {
		t.Fatalf("discovering plugins: %v", err)
	}
	mgr := clientmgmt.NewManager(log, logrus.InfoLevel, registry)
	t.Cleanup(mgr.CleanupClients)
	return mgr
}

// TestPluginBinary builds the plugin binary once and loads it the way the
// Velero server does, from a plugin folder over go-plugin's gRPC.
func TestPluginBinary(t *testing.T) {
	dir := pluginDir(t)
	// It serves the actions, run through that connection (pluginManager).
	t.Run("serves the actions", func(t *testing.T) {
		ns := env.Namespace(t)
		mgr := pluginManager(t, dir, ns)

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
	})
	// It reads its settings ConfigMap for each restore (each plugin
	// manager): a change applies to the next restore without restarting
	// anything, and settings that cannot be parsed fail the restore with
	// the reason.
	t.Run("reads its settings ConfigMap for each restore", func(t *testing.T) {
		ns := env.Namespace(t)
		appliesTo := func(t *testing.T) ([]string, error) {
			action, err := pluginManager(t, dir, ns).GetRestoreItemActionV2(velero.ActionName)
			if err != nil {
				return nil, err
			}
			sel, err := action.AppliesTo()
			return sel.IncludedResources, err
		}
		if got, err := appliesTo(t); err != nil || !slices.Equal(got, velero.DefaultConfig().Resources) {
			t.Fatalf("without settings: AppliesTo = %v, %v", got, err)
		}
		cm := velerosuite.SettingsConfigMap(t, env.Client, ns, "initlock-plugin-settings", string(velero.SettingsKind), map[string]string{velero.KeyResources: "machines.cluster.x-k8s.io"})
		if got, err := appliesTo(t); err != nil || !slices.Equal(got, []string{"machines.cluster.x-k8s.io"}) {
			t.Fatalf("with settings: AppliesTo = %v, %v", got, err)
		}
		cm.Data[velero.KeyLabelSelector] = "a in (("
		if err := env.Client.Update(t.Context(), cm); err != nil {
			t.Fatal(err)
		}
		if got, err := appliesTo(t); err == nil || !strings.Contains(err.Error(), "ConfigMap "+ns+"/initlock-plugin-settings: labelSelector=\"a in ((\" is not a label selector") {
			t.Fatalf("with bad settings: AppliesTo = %v, %v", got, err)
		}
	})
}
