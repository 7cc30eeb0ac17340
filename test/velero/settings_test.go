package velerosuite_test

import (
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/sirupsen/logrus"
	logtest "github.com/sirupsen/logrus/hooks/test"
	"github.com/vmware-tanzu/velero/pkg/plugin/clientmgmt"
	"github.com/vmware-tanzu/velero/pkg/plugin/clientmgmt/process"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/initlock/initlock/internal/velero"
	"github.com/initlock/initlock/pkg/initlock/capi"
)

// settingsConfigMap creates, in ns, a ConfigMap labelled as the plugin's
// settings with kind, holding data.
func settingsConfigMap(t *testing.T, ns, name, kind string, data map[string]string) *corev1.ConfigMap {
	t.Helper()
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Labels: map[string]string{
		velero.PluginConfigLabel: "", velero.SettingsLabel: kind,
	}}, Data: data}
	if err := env.Client.Create(t.Context(), cm); err != nil {
		t.Fatal(err)
	}
	return cm
}

func settingsIn(t *testing.T, ns string, vars map[string]string) velero.Settings {
	t.Helper()
	cs, err := kubernetes.NewForConfig(env.Config)
	if err != nil {
		t.Fatal(err)
	}
	return velero.Settings{ConfigMaps: cs.CoreV1().ConfigMaps(ns), Namespace: ns, Getenv: func(k string) string { return vars[k] }}
}

// The settings come from the ConfigMap Velero's convention names, else
// from the deprecated variables (with a warning), else the defaults; what
// cannot be meant is an error naming the fix.
func TestSettings(t *testing.T) {
	kind := string(velero.SettingsKind)
	for _, tc := range []struct {
		name string
		// setup creates ConfigMaps in ns.
		setup   func(t *testing.T, ns string)
		vars    map[string]string
		want    velero.Config
		warns   bool
		wantErr string
	}{
		{name: "defaults", want: velero.DefaultConfig()},
		{name: "ConfigMap", setup: func(t *testing.T, ns string) {
			settingsConfigMap(t, ns, "initlock-plugin-settings", kind, map[string]string{
				velero.KeyResources: "machines.cluster.x-k8s.io, clusters.cluster.x-k8s.io", velero.KeyLabelledResources: "-",
			})
			// Another plugin's settings are not ours.
			other := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "other", Labels: map[string]string{
				velero.PluginConfigLabel: "", "velero.io/change-storage-class": "RestoreItemAction"}}, Data: map[string]string{"a": "b"}}
			if err := env.Client.Create(t.Context(), other); err != nil {
				t.Fatal(err)
			}
		}, want: velero.Config{Resources: []string{"machines.cluster.x-k8s.io", "clusters.cluster.x-k8s.io"}, LabelSelector: capi.ClusterNameLabel}},
		{name: "kind of Velero's own actions", setup: func(t *testing.T, ns string) {
			settingsConfigMap(t, ns, "s", "RestoreItemAction", map[string]string{velero.KeyLabelSelector: "cluster.x-k8s.io/cluster-name in (a)"})
		}, want: velero.Config{Resources: velero.DefaultConfig().Resources, LabelledResources: velero.DefaultConfig().LabelledResources, LabelSelector: "cluster.x-k8s.io/cluster-name in (a)"}},
		{name: "deprecated variables", vars: map[string]string{velero.EnvLabelledResources: "configmaps"}, warns: true,
			want: velero.Config{Resources: velero.DefaultConfig().Resources, LabelledResources: []string{"configmaps"}, LabelSelector: capi.ClusterNameLabel}},
		{name: "both", setup: func(t *testing.T, ns string) {
			settingsConfigMap(t, ns, "s", kind, map[string]string{velero.KeyResources: "machines.cluster.x-k8s.io"})
		}, vars: map[string]string{velero.EnvResources: "clusters.cluster.x-k8s.io"},
			wantErr: "settings in both ConfigMap NS/s and the environment of the Velero server (INITLOCK_VELERO_RESOURCES): keep the ConfigMap and remove the variables, e.g. kubectl -n NS set env deployment/velero INITLOCK_VELERO_RESOURCES-"},
		{name: "bad selector", setup: func(t *testing.T, ns string) {
			settingsConfigMap(t, ns, "s", kind, map[string]string{velero.KeyLabelSelector: "a in (("})
		}, wantErr: `ConfigMap NS/s: labelSelector="a in ((" is not a label selector`},
		{name: "nothing selected", setup: func(t *testing.T, ns string) {
			settingsConfigMap(t, ns, "s", kind, map[string]string{velero.KeyResources: "-", velero.KeyLabelledResources: "-"})
		}, wantErr: "ConfigMap NS/s: resources and labelledResources select no resource"},
		{name: "unknown key", setup: func(t *testing.T, ns string) {
			settingsConfigMap(t, ns, "s", kind, map[string]string{"resource": "machines.cluster.x-k8s.io"})
		}, wantErr: `ConfigMap NS/s: unknown key "resource": the keys are resources, labelledResources and labelSelector`},
		{name: "wrong kind", setup: func(t *testing.T, ns string) {
			settingsConfigMap(t, ns, "s", "BackupItemAction", nil)
		}, wantErr: `ConfigMap NS/s: label initlock.dev/restore-owner-references="BackupItemAction": its value is the kind of plugin, RestoreItemActionV2`},
		{name: "two", setup: func(t *testing.T, ns string) {
			settingsConfigMap(t, ns, "s1", kind, nil)
			settingsConfigMap(t, ns, "s2", kind, nil)
		}, wantErr: `ConfigMaps s1, s2 in namespace "NS" all hold its settings (labels velero.io/plugin-config,initlock.dev/restore-owner-references): keep one`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ns := env.Namespace(t)
			if tc.setup != nil {
				tc.setup(t, ns)
			}
			log, hook := logtest.NewNullLogger()
			got, err := settingsIn(t, ns, tc.vars).Load(t.Context(), log)
			if tc.wantErr != "" {
				if want := strings.ReplaceAll(tc.wantErr, "NS", ns); err == nil || !strings.Contains(err.Error(), want) {
					t.Fatalf("Load = %+v, %v; want an error with %q", got, err, want)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if !equalStrings(got.Resources, tc.want.Resources) || !equalStrings(got.LabelledResources, tc.want.LabelledResources) || got.LabelSelector != tc.want.LabelSelector {
				t.Fatalf("Load = %+v, want %+v", got, tc.want)
			}
			if warned := len(hook.AllEntries()) == 1 && hook.LastEntry().Level == logrus.WarnLevel &&
				strings.Contains(hook.LastEntry().Message, "deprecated: move them to a ConfigMap in namespace"); warned != tc.warns {
				t.Errorf("warned = %t, want %t: %v", warned, tc.warns, hook.AllEntries())
			}
		})
	}
}

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
	if got, err := appliesTo(t); err != nil || !equalStrings(got, velero.DefaultConfig().Resources) {
		t.Fatalf("without settings: AppliesTo = %v, %v", got, err)
	}
	cm := settingsConfigMap(t, ns, "initlock-plugin-settings", string(velero.SettingsKind), map[string]string{velero.KeyResources: "machines.cluster.x-k8s.io"})
	if got, err := appliesTo(t); err != nil || !equalStrings(got, []string{"machines.cluster.x-k8s.io"}) {
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
