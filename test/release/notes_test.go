//go:build release

package release_test

import (
	"os"
	"path/filepath"
	"regexp"
	"testing"

	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/initlock/initlock/internal/kubeenv/veleroinstall"
)

// The plugin reference of the release notes is one Velero accepts: the
// init container "velero plugin add" makes of it with Velero's own code is
// valid on the API server.
func TestReleaseNotesPluginReference(t *testing.T) {
	b, err := os.ReadFile(filepath.Join(distDir(t), "release-notes.md"))
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`velero plugin add (\S+)`).FindSubmatch(b)
	if m == nil {
		t.Fatalf("release-notes.md has no velero plugin add:\n%s", b)
	}
	ns := env.Namespace(t)
	d := veleroinstall.Deployment(ns)
	c := veleroinstall.AddPlugin(d, string(m[1]))
	if err := env.Client.Create(t.Context(), d, client.DryRunAll); err != nil || c.Name != "initlock-velero-plugin-initlock" {
		t.Fatalf("velero plugin add %s: init container %q: %v", m[1], c.Name, err)
	}
}
