package velerosuite_test

import (
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/client-go/kubernetes"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	"github.com/initlock/initlock/internal/kubeenv"
	"github.com/initlock/initlock/internal/kubeenv/veleroinstall"
	"github.com/initlock/initlock/internal/velero"
)

// installDocs are the pages that tell how to install the plugin.
var installDocs = []string{"README.md", filepath.Join("docs", "install.md"), filepath.Join("docs", "reference.md")}

var (
	// pluginCommand finds the image references of "velero plugin add" and
	// "velero plugin remove".
	pluginCommand = regexp.MustCompile(`velero plugin (?:add|remove) (\S+)`)
	// pluginsFlag finds the list of "velero install --plugins".
	pluginsFlag = regexp.MustCompile(`--plugins[= ](\S+)`)
	// yamlBlock finds the YAML examples.
	yamlBlock = regexp.MustCompile("(?s)```yaml\n(.*?)```")
	// digest stands for the digest of a release.
	digest = "sha256:" + strings.Repeat("0123456789abcdef", 4)
)

// docs returns the install pages, with the digest placeholder filled in.
func docs(t *testing.T) map[string]string {
	t.Helper()
	root, err := kubeenv.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]string{}
	for _, p := range installDocs {
		b, err := os.ReadFile(filepath.Join(root, p))
		if err != nil {
			t.Fatal(err)
		}
		out[p] = strings.ReplaceAll(string(b), "sha256:<digest>", digest)
	}
	return out
}

// dryRun writes d with a server-side dry run: the API server validates it
// as it would Velero's Deployment.
func dryRun(t *testing.T, d *appsv1.Deployment) error {
	t.Helper()
	return env.Client.Create(t.Context(), d, client.DryRunAll)
}

// Every way the install pages add the plugin to Velero gives a Deployment
// that Kubernetes accepts: "velero plugin add" and "velero install
// --plugins" with Velero's own code for the init container's name, and the
// Helm chart's initContainers as written. A reference with both a tag and
// a digest does not: Velero derives a container name with a colon.
func TestPluginInstallAsDocumented(t *testing.T) {
	ns := env.Namespace(t)
	var refs, lists int
	for page, text := range docs(t) {
		for _, m := range pluginCommand.FindAllStringSubmatch(text, -1) {
			refs++
			d := veleroinstall.Deployment(ns, "velero/velero-plugin-for-aws:v1.14.3")
			c := veleroinstall.AddPlugin(d, m[1])
			if err := dryRun(t, d); err != nil {
				t.Errorf("%s: velero plugin add %s: init container %q: %v", page, m[1], c.Name, err)
			}
			if strings.Contains(m[1], "initlock") && c.Name != "initlock-velero-plugin-initlock" {
				t.Errorf("%s: velero plugin add %s names the init container %q", page, m[1], c.Name)
			}
		}
		for _, m := range pluginsFlag.FindAllStringSubmatch(text, -1) {
			lists++
			if err := dryRun(t, veleroinstall.Deployment(ns, strings.Split(m[1], ",")...)); err != nil {
				t.Errorf("%s: velero install --plugins %s: %v", page, m[1], err)
			}
		}
		for _, m := range yamlBlock.FindAllStringSubmatch(text, -1) {
			var values struct {
				InitContainers []corev1.Container `json:"initContainers"`
			}
			if !strings.HasPrefix(m[1], "initContainers:") {
				continue
			}
			lists++
			if err := yaml.UnmarshalStrict([]byte(m[1]), &values); err != nil {
				t.Fatalf("%s: Helm values: %v", page, err)
			}
			d := veleroinstall.Deployment(ns)
			d.Spec.Template.Spec.InitContainers = values.InitContainers
			if err := dryRun(t, d); err != nil {
				t.Errorf("%s: Helm initContainers %+v: %v", page, values.InitContainers, err)
			}
		}
	}
	if refs < 4 || lists < 4 {
		t.Fatalf("found %d velero plugin commands and %d plugin lists in %v", refs, lists, installDocs)
	}

	d := veleroinstall.Deployment(ns)
	c := veleroinstall.AddPlugin(d, "ghcr.io/initlock/velero-plugin-initlock:v0.1.0@"+digest)
	if err := dryRun(t, d); !apierrors.IsInvalid(err) || c.Name != "initlock-velero-plugin-initlock:v0-1-0" {
		t.Fatalf("a reference with a tag and a digest: init container %q: %v, want Invalid", c.Name, err)
	}
}

// The settings ConfigMap of the install pages is one the plugin reads, and it
// holds the defaults.
func TestSettingsConfigMapAsDocumented(t *testing.T) {
	ns := env.Namespace(t)
	cs, err := kubernetes.NewForConfig(env.Config)
	if err != nil {
		t.Fatal(err)
	}
	var found int
	for page, text := range docs(t) {
		for _, m := range yamlBlock.FindAllStringSubmatch(text, -1) {
			if !strings.Contains(m[1], velero.PluginConfigLabel) {
				continue
			}
			found++
			cm := &corev1.ConfigMap{}
			if err := yaml.UnmarshalStrict([]byte(m[1]), cm); err != nil {
				t.Fatalf("%s: %v", page, err)
			}
			if cm.Namespace != "velero" {
				t.Errorf("%s: the ConfigMap is in namespace %q, not Velero's default", page, cm.Namespace)
			}
			cm.Namespace = ns
			if err := env.Client.Create(t.Context(), cm); err != nil {
				t.Fatal(err)
			}
			got, err := velero.Settings{ConfigMaps: cs.CoreV1().ConfigMaps(ns), Namespace: ns, Getenv: func(string) string { return "" }}.Load(t.Context(), nil)
			want := velero.DefaultConfig()
			if err != nil || !slices.Equal(got.Resources, want.Resources) || !slices.Equal(got.LabelledResources, want.LabelledResources) || got.LabelSelector != want.LabelSelector {
				t.Errorf("%s: the ConfigMap gives %+v, %v; want the defaults %+v", page, got, err, want)
			}
			if err := env.Client.Delete(t.Context(), cm); err != nil {
				t.Fatal(err)
			}
		}
	}
	if found == 0 {
		t.Fatalf("no settings ConfigMap in %v", installDocs)
	}
}
