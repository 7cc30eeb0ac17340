package release_test

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/cluster-api/cmd/clusterctl/api/v1alpha3"
	"sigs.k8s.io/cluster-api/cmd/clusterctl/client"
	"sigs.k8s.io/cluster-api/cmd/clusterctl/client/config"
)

// TestClusterctlReadsTheProvider generates the initlock add-on provider
// from a local repository holding the release's files, as
// "clusterctl generate provider --addon initlock:VERSION" does.
func TestClusterctlReadsTheProvider(t *testing.T) {
	repo, version, image := localRepository(t)
	label := v1alpha3.ManifestLabel("initlock", v1alpha3.AddonProviderType)
	b, err := os.ReadFile(filepath.Join(repo, "addon-components.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	// clusterctl adds the provider label itself when it reads the file:
	// check that the file carries it on every object already.
	for i, doc := range strings.Split(string(b), "\n---\n") {
		if !strings.Contains(doc, "\n    cluster.x-k8s.io/provider: "+label+"\n") {
			t.Errorf("object %d of addon-components.yaml has no label cluster.x-k8s.io/provider: %s:\n%s", i, label, doc)
		}
	}
	// Without a variable set, clusterctl applies the defaults.
	comps := generate(t, repo, version, nil)
	if comps.Version() != version || comps.TargetNamespace() != "initlock-system" || comps.ManifestLabel() != "addon-initlock" {
		t.Errorf("provider %s %s in %s, label %s", comps.Name(), comps.Version(), comps.TargetNamespace(), comps.ManifestLabel())
	}
	if imgs := comps.Images(); len(imgs) != 1 || imgs[0] != image {
		t.Errorf("images %v, want [%s]", imgs, image)
	}
	kinds := map[string]int{}
	for _, o := range comps.Objs() {
		kinds[o.GetKind()]++
		if got := o.GetLabels()[v1alpha3.ClusterctlLabel]; o.GetLabels()["cluster.x-k8s.io/provider"] != label {
			t.Errorf("%s %s: provider label %q (clusterctl label %q)", o.GetKind(), o.GetName(), o.GetLabels()["cluster.x-k8s.io/provider"], got)
		}
	}
	for _, k := range []string{"Namespace", "Deployment", "ServiceAccount", "ClusterRole", "ClusterRoleBinding", "Role", "RoleBinding", "Service"} {
		if kinds[k] == 0 {
			t.Errorf("the components hold no %s (%v)", k, kinds)
		}
	}
	t.Logf("clusterctl generated %s %s: %d objects %v, image %s", comps.ManifestLabel(), comps.Version(), len(comps.Objs()), kinds, image)
}

// The manager's main settings are clusterctl variables with defaults:
// clusterctl lists them, none is required, and each one set (in the
// environment or clusterctl.yaml) reaches the manager's arguments.
func TestClusterctlVariables(t *testing.T) {
	repo, version, _ := localRepository(t)
	want := []string{"INITLOCK_LOG_LEVEL", "INITLOCK_ORPHAN_GRACE", "INITLOCK_RELEASE_AFTER_INIT", "INITLOCK_RELINK"}
	defaults := []string{"--release-after-init=true", "--orphan-grace=10m", "--relink=true", "--zap-log-level=info"}
	comps := generate(t, repo, version, nil)
	if got := comps.Variables(); !slices.Equal(slices.Sorted(slices.Values(got)), want) {
		t.Errorf("variables %v, want %v", got, want)
	}
	if got := managerArgs(t, comps.Objs()); !slices.Equal(got[3:], defaults) {
		t.Errorf("manager args without variables: %v, want %v after the first three", got, defaults)
	}
	set := map[string]string{"INITLOCK_RELEASE_AFTER_INIT": "false", "INITLOCK_ORPHAN_GRACE": "1h", "INITLOCK_RELINK": "false", "INITLOCK_LOG_LEVEL": "debug"}
	got := managerArgs(t, generate(t, repo, version, set).Objs())
	if want := []string{"--release-after-init=false", "--orphan-grace=1h", "--relink=false", "--zap-log-level=debug"}; !slices.Equal(got[3:], want) {
		t.Errorf("manager args with variables: %v, want %v after the first three", got, want)
	}
}

// localRepository lays out the components and metadata of the release in
// $INITLOCK_DIST as a clusterctl file repository:
// {basepath}/{provider label}/{version}/{files}. It returns the folder
// of the components, the version and the manager's image reference.
func localRepository(t *testing.T) (string, string, string) {
	t.Helper()
	dist := os.Getenv("INITLOCK_DIST")
	if dist == "" {
		t.Fatal("INITLOCK_DIST is not set: run this test with make test-release")
	}
	b, err := os.ReadFile(filepath.Join(dist, "images.txt"))
	if err != nil {
		t.Fatal(err)
	}
	var image string
	for _, ref := range strings.Fields(string(b)) {
		if strings.Contains(ref, "/initlock-manager:") {
			image = ref
		}
	}
	ref, _, _ := strings.Cut(image, "@")
	version := ref[strings.LastIndex(ref, ":")+1:]
	repo := filepath.Join(t.TempDir(), v1alpha3.ManifestLabel("initlock", v1alpha3.AddonProviderType), version)
	if err := os.MkdirAll(repo, 0o755); err != nil {
		t.Fatal(err)
	}
	for _, f := range []string{"addon-components.yaml", "metadata.yaml"} {
		b, err := os.ReadFile(filepath.Join(dist, f))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(repo, f), b, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	return repo, version, image
}

// generate reads the provider from repo as "clusterctl generate provider
// --addon initlock:VERSION" does, with the variables of vars set in
// clusterctl's configuration.
func generate(t *testing.T, repo, version string, vars map[string]string) client.Components {
	t.Helper()
	ctx := t.Context()
	reader := config.NewMemoryReader()
	if err := reader.Init(ctx, ""); err != nil {
		t.Fatal(err)
	}
	if _, err := reader.AddProvider("initlock", v1alpha3.AddonProviderType, "file://"+filepath.Join(repo, "addon-components.yaml")); err != nil {
		t.Fatal(err)
	}
	for k, v := range vars {
		reader.Set(k, v)
	}
	cfg, err := config.New(ctx, "", config.InjectReader(reader))
	if err != nil {
		t.Fatal(err)
	}
	c, err := client.New(ctx, "", client.InjectConfig(cfg))
	if err != nil {
		t.Fatal(err)
	}
	comps, err := c.GenerateProvider(ctx, "initlock:"+version, v1alpha3.AddonProviderType, client.ComponentsOptions{})
	if err != nil {
		t.Fatalf("clusterctl generate provider --addon initlock:%s: %v", version, err)
	}
	return comps
}

// managerArgs returns the arguments of the manager's container.
func managerArgs(t *testing.T, objs []unstructured.Unstructured) []string {
	t.Helper()
	for _, o := range objs {
		if o.GetKind() != "Deployment" {
			continue
		}
		containers, _, _ := unstructured.NestedSlice(o.Object, "spec", "template", "spec", "containers")
		for _, c := range containers {
			if m := c.(map[string]any); m["name"] == "manager" {
				args, _, _ := unstructured.NestedStringSlice(m, "args")
				return args
			}
		}
	}
	t.Fatal("no manager container in the components")
	return nil
}
