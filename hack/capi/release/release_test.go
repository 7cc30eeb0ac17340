package release_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"sigs.k8s.io/cluster-api/cmd/clusterctl/api/v1alpha3"
	"sigs.k8s.io/cluster-api/cmd/clusterctl/client"
	"sigs.k8s.io/cluster-api/cmd/clusterctl/client/config"
)

// TestClusterctlReadsTheProvider generates the initlock add-on provider
// from a local repository holding the release's files, as
// "clusterctl generate provider --addon initlock:VERSION" does.
func TestClusterctlReadsTheProvider(t *testing.T) {
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

	// {basepath}/{provider label}/{version}/{components and metadata}
	label := v1alpha3.ManifestLabel("initlock", v1alpha3.AddonProviderType)
	repo := filepath.Join(t.TempDir(), label, version)
	if err := os.MkdirAll(repo, 0o755); err != nil {
		t.Fatal(err)
	}
	for _, f := range []string{"addon-components.yaml", "metadata.yaml"} {
		b, err := os.ReadFile(filepath.Join(dist, f))
		if err != nil {
			t.Fatal(err)
		}
		if f == "addon-components.yaml" {
			// clusterctl adds the provider label itself when it reads the
			// file: check that the file carries it on every object already.
			for i, doc := range strings.Split(string(b), "\n---\n") {
				if !strings.Contains(doc, "\n    cluster.x-k8s.io/provider: "+label+"\n") {
					t.Errorf("object %d of addon-components.yaml has no label cluster.x-k8s.io/provider: %s:\n%s", i, label, doc)
				}
			}
		}
		if err := os.WriteFile(filepath.Join(repo, f), b, 0o600); err != nil {
			t.Fatal(err)
		}
	}

	ctx := t.Context()
	reader := config.NewMemoryReader()
	if err := reader.Init(ctx, ""); err != nil {
		t.Fatal(err)
	}
	if _, err := reader.AddProvider("initlock", v1alpha3.AddonProviderType, "file://"+filepath.Join(repo, "addon-components.yaml")); err != nil {
		t.Fatal(err)
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
	if comps.Version() != version || comps.TargetNamespace() != "initlock-system" || comps.ManifestLabel() != "addon-initlock" {
		t.Errorf("provider %s %s in %s, label %s", comps.Name(), comps.Version(), comps.TargetNamespace(), comps.ManifestLabel())
	}
	if imgs := comps.Images(); len(imgs) != 1 || imgs[0] != image {
		t.Errorf("images %v, want [%s]", imgs, image)
	}
	if vars := comps.Variables(); len(vars) != 0 {
		t.Errorf("variables %v, want none", vars)
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
