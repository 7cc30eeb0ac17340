package velerosuite

import (
	"slices"
	"strings"
	"testing"

	"github.com/sirupsen/logrus"
	logtest "github.com/sirupsen/logrus/hooks/test"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/initlock/initlock/internal/velero"
	"github.com/initlock/initlock/pkg/initlock/capi"
)

// SettingsConfigMap creates through c, in ns, a ConfigMap labelled as the
// plugin's settings with kind, holding data.
func SettingsConfigMap(t *testing.T, c client.Client, ns, name, kind string, data map[string]string) *corev1.ConfigMap {
	t.Helper()
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Labels: map[string]string{
		velero.PluginConfigLabel: "", velero.SettingsLabel: kind,
	}}, Data: data}
	if err := c.Create(t.Context(), cm); err != nil {
		t.Fatal(err)
	}
	return cm
}

// Settings runs the cases of velero.Settings: the settings come from the
// ConfigMap Velero's convention names, else from the deprecated variables
// (with a warning), else the defaults; what cannot be meant is an error
// naming the fix; and Load makes one request, a list of ConfigMaps.
func Settings(t *testing.T, b Backend) {
	kind := string(velero.SettingsKind)
	for _, tc := range []struct {
		name string
		// setup creates ConfigMaps in ns.
		setup   func(t *testing.T, c client.Client, ns string)
		vars    map[string]string
		want    velero.Config
		warns   bool
		wantErr string
	}{
		{name: "defaults", want: velero.DefaultConfig()},
		{name: "ConfigMap", setup: func(t *testing.T, c client.Client, ns string) {
			SettingsConfigMap(t, c, ns, "initlock-plugin-settings", kind, map[string]string{
				velero.KeyResources: "machines.cluster.x-k8s.io, clusters.cluster.x-k8s.io", velero.KeyLabelledResources: "-",
			})
			// Another plugin's settings are not ours.
			other := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "other", Labels: map[string]string{
				velero.PluginConfigLabel: "", "velero.io/change-storage-class": "RestoreItemAction"}}, Data: map[string]string{"a": "b"}}
			if err := c.Create(t.Context(), other); err != nil {
				t.Fatal(err)
			}
		}, want: velero.Config{Resources: []string{"machines.cluster.x-k8s.io", "clusters.cluster.x-k8s.io"}, LabelSelector: capi.ClusterNameLabel}},
		{name: "kind of Velero's own actions", setup: func(t *testing.T, c client.Client, ns string) {
			SettingsConfigMap(t, c, ns, "s", "RestoreItemAction", map[string]string{velero.KeyLabelSelector: "cluster.x-k8s.io/cluster-name in (a)"})
		}, want: velero.Config{Resources: velero.DefaultConfig().Resources, LabelledResources: velero.DefaultConfig().LabelledResources, LabelSelector: "cluster.x-k8s.io/cluster-name in (a)"}},
		{name: "deprecated variables", vars: map[string]string{velero.EnvLabelledResources: "configmaps"}, warns: true,
			want: velero.Config{Resources: velero.DefaultConfig().Resources, LabelledResources: []string{"configmaps"}, LabelSelector: capi.ClusterNameLabel}},
		{name: "every variable", vars: map[string]string{
			velero.EnvResources:         " machines.cluster.x-k8s.io , *.bootstrap.cluster.x-k8s.io,",
			velero.EnvLabelledResources: "configmaps",
			velero.EnvLabelSelector:     "cluster.x-k8s.io/cluster-name in (a,b)",
		}, warns: true, want: velero.Config{
			Resources:         []string{"machines.cluster.x-k8s.io", "*.bootstrap.cluster.x-k8s.io"},
			LabelledResources: []string{"configmaps"},
			LabelSelector:     "cluster.x-k8s.io/cluster-name in (a,b)",
		}},
		{name: "no labelled resources in the variables", vars: map[string]string{velero.EnvLabelledResources: "-"}, warns: true,
			want: velero.Config{Resources: velero.DefaultConfig().Resources, LabelSelector: capi.ClusterNameLabel}},
		{name: "bad selector in the variables", vars: map[string]string{velero.EnvLabelSelector: "a in (("},
			wantErr: velero.EnvLabelSelector + `="a in ((" is not a label selector`},
		{name: "nothing selected by the variables", vars: map[string]string{velero.EnvResources: "-", velero.EnvLabelledResources: "-"},
			wantErr: velero.EnvResources + " and " + velero.EnvLabelledResources + " select no resource"},
		{name: "both", setup: func(t *testing.T, c client.Client, ns string) {
			SettingsConfigMap(t, c, ns, "s", kind, map[string]string{velero.KeyResources: "machines.cluster.x-k8s.io"})
		}, vars: map[string]string{velero.EnvResources: "clusters.cluster.x-k8s.io"},
			wantErr: "settings in both ConfigMap NS/s and the environment of the Velero server (INITLOCK_VELERO_RESOURCES): keep the ConfigMap and remove the variables, e.g. kubectl -n NS set env deployment/velero INITLOCK_VELERO_RESOURCES-"},
		{name: "bad selector", setup: func(t *testing.T, c client.Client, ns string) {
			SettingsConfigMap(t, c, ns, "s", kind, map[string]string{velero.KeyLabelSelector: "a in (("})
		}, wantErr: `ConfigMap NS/s: labelSelector="a in ((" is not a label selector`},
		{name: "nothing selected", setup: func(t *testing.T, c client.Client, ns string) {
			SettingsConfigMap(t, c, ns, "s", kind, map[string]string{velero.KeyResources: "-", velero.KeyLabelledResources: "-"})
		}, wantErr: "ConfigMap NS/s: resources and labelledResources select no resource"},
		{name: "unknown key", setup: func(t *testing.T, c client.Client, ns string) {
			SettingsConfigMap(t, c, ns, "s", kind, map[string]string{"resource": "machines.cluster.x-k8s.io"})
		}, wantErr: `ConfigMap NS/s: unknown key "resource": the keys are resources, labelledResources and labelSelector`},
		{name: "wrong kind", setup: func(t *testing.T, c client.Client, ns string) {
			SettingsConfigMap(t, c, ns, "s", "BackupItemAction", nil)
		}, wantErr: `ConfigMap NS/s: label initlock.dev/restore-owner-references="BackupItemAction": its value is the kind of plugin, RestoreItemActionV2`},
		{name: "two", setup: func(t *testing.T, c client.Client, ns string) {
			SettingsConfigMap(t, c, ns, "s1", kind, nil)
			SettingsConfigMap(t, c, ns, "s2", kind, nil)
		}, wantErr: `ConfigMaps s1, s2 in namespace "NS" all hold its settings (labels velero.io/plugin-config,initlock.dev/restore-owner-references): keep one`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			api := b.New(t)
			ns := api.Namespace()
			if tc.setup != nil {
				tc.setup(t, api.Client, ns)
			}
			api.Counter.Reset()
			log, hook := logtest.NewNullLogger()
			settings := velero.Settings{ConfigMaps: api.ConfigMaps(ns), Namespace: ns, Getenv: func(k string) string { return tc.vars[k] }}
			got, err := settings.Load(t.Context(), log)
			// One list of the ConfigMaps of Velero's namespace, whatever
			// it finds: the only request of the plugin.
			if n, all := api.Counter.Of("configmaps", ns).Count("list"), api.Counter.Reads()+api.Counter.Writes(); n != 1 || all != 1 {
				t.Errorf("Load made %d requests, %d lists of the ConfigMaps of %s; want the list alone:\n%s", all, n, ns, api.Counter)
			}
			if tc.wantErr != "" {
				if want := strings.ReplaceAll(tc.wantErr, "NS", ns); err == nil || !strings.Contains(err.Error(), want) {
					t.Fatalf("Load = %+v, %v; want an error with %q", got, err, want)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(got.Resources, tc.want.Resources) || !slices.Equal(got.LabelledResources, tc.want.LabelledResources) || got.LabelSelector != tc.want.LabelSelector {
				t.Fatalf("Load = %+v, want %+v", got, tc.want)
			}
			if warned := len(hook.AllEntries()) == 1 && hook.LastEntry().Level == logrus.WarnLevel &&
				strings.Contains(hook.LastEntry().Message, "deprecated: move them to a ConfigMap in namespace"); warned != tc.warns {
				t.Errorf("warned = %t, want %t: %v", warned, tc.warns, hook.AllEntries())
			}
		})
	}
}
