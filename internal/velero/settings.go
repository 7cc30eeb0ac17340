package velero

import (
	"context"
	"fmt"
	"strings"

	"github.com/sirupsen/logrus"
	veleroclient "github.com/vmware-tanzu/velero/pkg/client"
	"github.com/vmware-tanzu/velero/pkg/plugin/framework/common"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	corev1client "k8s.io/client-go/kubernetes/typed/core/v1"
)

// The plugin's settings are read as Velero documents it for plugins: from a
// ConfigMap in Velero's namespace labelled PluginConfigLabel and
// SettingsLabel (any name), with these data keys.
const (
	// PluginConfigLabel marks a ConfigMap as the settings of a Velero
	// plugin; its value is empty.
	PluginConfigLabel = "velero.io/plugin-config"
	// SettingsLabel is the label that names the plugin the ConfigMap is for:
	// ActionName, with the kind of plugin as its value.
	SettingsLabel = ActionName
	// SettingsKind is the value of SettingsLabel: the kind "velero plugin
	// get" shows for the actions. The kind of Velero's own restore item
	// actions, common.PluginKindRestoreItemAction, is taken too.
	SettingsKind = common.PluginKindRestoreItemActionV2
	// KeyResources is the data key of Config.Resources, written as
	// EnvResources is.
	KeyResources = "resources"
	// KeyLabelledResources is the data key of Config.LabelledResources,
	// written as EnvLabelledResources is.
	KeyLabelledResources = "labelledResources"
	// KeyLabelSelector is the data key of Config.LabelSelector.
	KeyLabelSelector = "labelSelector"
)

// settingNames name where each setting is read, for errors.
type settingNames struct {
	resources, labelledResources, labelSelector string
}

var envNames = settingNames{EnvResources, EnvLabelledResources, EnvLabelSelector}

// parseConfig returns DefaultConfig with the values get returns for the
// names in n replacing its own, checked.
func parseConfig(get func(string) string, n settingNames) (Config, error) {
	cfg := DefaultConfig()
	if v := get(n.resources); v != "" {
		cfg.Resources = splitList(v)
	}
	if v := get(n.labelledResources); v != "" {
		cfg.LabelledResources = splitList(v)
	}
	if v := get(n.labelSelector); v != "" {
		cfg.LabelSelector = v
	}
	if _, err := labels.Parse(cfg.LabelSelector); err != nil {
		return Config{}, fmt.Errorf("%s=%q is not a label selector: %w", n.labelSelector, cfg.LabelSelector, err)
	}
	if len(cfg.Resources) == 0 && len(cfg.LabelledResources) == 0 {
		return Config{}, fmt.Errorf("%s and %s select no resource: set at least one of them", n.resources, n.labelledResources)
	}
	return cfg, nil
}

// Settings find the actions' Config when Velero creates them, once per
// restore, so that a change of the ConfigMap applies from the next restore
// on, without restarting Velero.
type Settings struct {
	// ConfigMaps reads the ConfigMaps of Velero's namespace.
	ConfigMaps corev1client.ConfigMapInterface
	// Namespace is Velero's namespace, for messages.
	Namespace string
	// Getenv reads the environment of the Velero server, where the
	// deprecated variables (EnvResources, ...) may still be set.
	Getenv func(string) string
}

// Load returns the Config of the settings ConfigMap, else that of the
// deprecated environment variables (with a warning in log), else
// DefaultConfig. A setting that cannot be parsed, several settings
// ConfigMaps, or settings in both places are errors naming what to fix: the
// restore then fails with that error instead of recording owners with
// settings that were not meant.
func (s Settings) Load(ctx context.Context, log logrus.FieldLogger) (Config, error) {
	cm, err := s.configMap(ctx)
	if err != nil {
		return Config{}, err
	}
	var set []string
	for _, name := range []string{EnvResources, EnvLabelledResources, EnvLabelSelector} {
		if s.Getenv != nil && s.Getenv(name) != "" {
			set = append(set, name)
		}
	}
	if cm == nil {
		cfg, err := ConfigFromEnv(s.Getenv)
		if err == nil && len(set) > 0 && log != nil {
			log.Warnf("velero-plugin-initlock: settings read from the environment of the Velero server (%s), which is deprecated: move them to a ConfigMap in namespace %q labelled %s=\"\" and %s=%s (keys %s, %s, %s), then remove the variables",
				strings.Join(set, ", "), s.Namespace, PluginConfigLabel, SettingsLabel, SettingsKind, KeyResources, KeyLabelledResources, KeyLabelSelector)
		}
		return cfg, err
	}
	where := fmt.Sprintf("ConfigMap %s/%s", cm.Namespace, cm.Name)
	if len(set) > 0 {
		return Config{}, fmt.Errorf("velero-plugin-initlock: settings in both %s and the environment of the Velero server (%s): keep the ConfigMap and remove the variables, e.g. kubectl -n %s set env deployment/velero %s",
			where, strings.Join(set, ", "), cm.Namespace, strings.Join(unset(set), " "))
	}
	for k := range cm.Data {
		if k != KeyResources && k != KeyLabelledResources && k != KeyLabelSelector {
			return Config{}, fmt.Errorf("velero-plugin-initlock: %s: unknown key %q: the keys are %s, %s and %s", where, k, KeyResources, KeyLabelledResources, KeyLabelSelector)
		}
	}
	cfg, err := parseConfig(func(k string) string { return cm.Data[k] }, settingNames{KeyResources, KeyLabelledResources, KeyLabelSelector})
	if err != nil {
		return Config{}, fmt.Errorf("velero-plugin-initlock: %s: %w", where, err)
	}
	return cfg, nil
}

// configMap returns the settings ConfigMap, nil when there is none: one
// list of the ConfigMaps that carry both labels.
func (s Settings) configMap(ctx context.Context) (*corev1.ConfigMap, error) {
	selector := PluginConfigLabel + "," + SettingsLabel
	list, err := s.ConfigMaps.List(ctx, metav1.ListOptions{LabelSelector: selector})
	if err != nil {
		return nil, fmt.Errorf("velero-plugin-initlock: listing its settings ConfigMap (labels %s) in namespace %q: %w", selector, s.Namespace, err)
	}
	var names []string
	for _, cm := range list.Items {
		if v := cm.Labels[SettingsLabel]; v != string(SettingsKind) && v != string(common.PluginKindRestoreItemAction) {
			return nil, fmt.Errorf("velero-plugin-initlock: ConfigMap %s/%s: label %s=%q: its value is the kind of plugin, %s", cm.Namespace, cm.Name, SettingsLabel, v, SettingsKind)
		}
		names = append(names, cm.Name)
	}
	switch len(list.Items) {
	case 0:
		return nil, nil
	case 1:
		return &list.Items[0], nil
	}
	return nil, fmt.Errorf("velero-plugin-initlock: ConfigMaps %s in namespace %q all hold its settings (labels %s): keep one", strings.Join(names, ", "), s.Namespace, selector)
}

func unset(names []string) []string {
	out := make([]string, len(names))
	for i, n := range names {
		out[i] = n + "-"
	}
	return out
}

// FactorySettings are the Settings of a plugin started by Velero: the
// Kubernetes client and namespace come from Velero's client factory, which
// reads the --kubeconfig, --kubecontext and --namespace arguments Velero
// passes its plugins (those of the Velero server), then $KUBECONFIG and the
// in-cluster configuration, and $VELERO_NAMESPACE; the environment is
// getenv's.
func FactorySettings(f veleroclient.Factory, getenv func(string) string) func() (Settings, error) {
	return func() (Settings, error) {
		kc, err := f.KubeClient()
		if err != nil {
			return Settings{}, fmt.Errorf("velero-plugin-initlock: no Kubernetes client to read its settings ConfigMap with: %w", err)
		}
		return Settings{ConfigMaps: kc.CoreV1().ConfigMaps(f.Namespace()), Namespace: f.Namespace(), Getenv: getenv}, nil
	}
}
