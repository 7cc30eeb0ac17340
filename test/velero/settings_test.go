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

	"github.com/initlock/initlock/internal/velero"
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

// The plugin binary, loaded as Velero loads it, reads its settings
// ConfigMap for each restore (each plugin manager): a change applies to
// the next restore without restarting anything, and settings that cannot
// be parsed fail the restore with the reason.
func TestPluginReadsItsSettingsConfigMap(t *testing.T) {
	ns := env.Namespace(t)
	dir := pluginDir(t)
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
}
