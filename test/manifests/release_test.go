//go:build release

package manifests_test

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/initlock/initlock/internal/kubeenv"
)

// TestReleaseInstallManifests applies the install manifests of a release
// ($INITLOCK_DIST, written by make release) as
// "kubectl create namespace initlock-system" then
// "kubectl apply --server-side --dry-run=server -f install.yaml" would,
// after checking that the Namespace comes first in each.
func TestReleaseInstallManifests(t *testing.T) {
	dist := os.Getenv("INITLOCK_DIST")
	if dist == "" {
		t.Fatal("INITLOCK_DIST is not set: run this test with make test-release")
	}
	for _, name := range []string{"install.yaml", "install-relink-secrets.yaml", "addon-components.yaml", "owner-references-enforcement.yaml"} {
		t.Run(name, func(t *testing.T) {
			objs, err := kubeenv.ReadObjects(filepath.Join(dist, name))
			if err != nil {
				t.Fatal(err)
			}
			if name == "owner-references-enforcement.yaml" {
				// Applied beside an install: a ClusterRole and its binding.
				validate := validator(t)
				for _, o := range objs {
					validate(o)
				}
				return
			}
			if len(objs) == 0 || objs[0].GetKind() != "Namespace" {
				t.Fatalf("%s does not start with the Namespace", name)
			}
			validateInstall(t, objs)
		})
	}
}
