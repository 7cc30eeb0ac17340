package main

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"text/template"
	"time"

	"github.com/initlock/initlock/hack/release/archive"
	"github.com/initlock/initlock/hack/release/notes"
)

// krewPlatforms are the platforms of a release's kubectl-initlock archives
// (-archive-platforms).
var krewPlatforms = []string{"linux/amd64", "linux/arm64", "darwin/amd64", "darwin/arm64"}

func writeTarGz(path string, bin, license []byte, epoch time.Time) error {
	var b bytes.Buffer
	if err := archive.WriteTarGz(&b, []archive.File{
		{Name: "kubectl-initlock", Mode: 0o755, Content: bin},
		{Name: "LICENSE", Mode: 0o644, Content: license},
	}, epoch); err != nil {
		return err
	}
	return os.WriteFile(path, b.Bytes(), 0o644)
}

var krewTemplate = template.Must(template.New("krew").Parse(`apiVersion: krew.googlecontainertools.github.com/v1alpha2
kind: Plugin
metadata:
  name: initlock
spec:
  version: {{.Version}}
  homepage: https://github.com/initlock/initlock
  shortDescription: See and repair Cluster API control-plane init locks
  description: |
    Lists every Cluster API control-plane init lock (the ConfigMap
    <cluster>-lock of CABPK, RKE2, k3s and MicroK8s) of a management cluster
    with a verdict, repairs the broken ones (unowned after a restore or
    move, held after init, orphaned) with preconditions, and releases one
    lock safely.
  platforms:
{{- range .Platforms}}
  - selector:
      matchLabels:
        os: {{.OS}}
        arch: {{.Arch}}
    uri: {{.URI}}
    sha256: {{.SHA256}}
    bin: kubectl-initlock
    files:
    - from: kubectl-initlock
      to: .
    - from: LICENSE
      to: .
{{- end}}
`))

// krew writes initlock.yaml, the krew plugin manifest of the archives,
// with their sha256 (krew requires the file to be named after the plugin).
func (r *release) krew() error {
	type platform struct{ OS, Arch, URI, SHA256 string }
	data := struct {
		Version   string
		Platforms []platform
	}{Version: r.o.version}
	for _, p := range r.o.archivePlatforms {
		name := r.archiveNames[p]
		sum, err := sha256File(filepath.Join(r.o.out, name))
		if err != nil {
			return err
		}
		goos, goarch, _ := strings.Cut(p, "/")
		data.Platforms = append(data.Platforms, platform{goos, goarch, r.o.downloadURL + "/" + r.o.version + "/" + name, sum})
	}
	var b bytes.Buffer
	if err := krewTemplate.Execute(&b, data); err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(r.o.out, "initlock.yaml"), b.Bytes(), 0o644)
}

// notes writes release-notes.md: what changed for an operator (changed
// defaults, upgrade notes), the series' row of the compatibility table,
// the images, how to install, and the commits.
func (r *release) notes(refs map[string]string) error {
	changes, err := notes.Changes(r.o.root, r.o.version)
	if err != nil {
		return err
	}
	install, err := os.ReadFile(filepath.Join(r.o.root, "docs", "install.md"))
	if err != nil {
		return err
	}
	compatibility, err := notes.CompatibilityRow(string(install), r.o.version)
	if err != nil {
		return fmt.Errorf("docs/install.md: %w", err)
	}
	changedDefaults, upgradeNotes, err := notes.Upgrade(r.o.root, r.o.version)
	if err != nil {
		return err
	}
	var b strings.Builder
	fmt.Fprintf(&b, "# initlock %s\n\n", r.o.version)
	fmt.Fprintf(&b, "## %s\n\n%s\n\n## %s\n\n%s\n\n", notes.ChangedDefaults, changedDefaults, notes.UpgradeNotes, upgradeNotes)
	fmt.Fprintf(&b, "## Compatibility\n\n%s\nEvery version: docs/install.md#compatibility.\n\n## Images\n\n", compatibility)
	for _, s := range specs() {
		fmt.Fprintf(&b, "- `%s`\n", refs[s.name])
	}
	url := r.o.downloadURL + "/" + r.o.version
	fmt.Fprintf(&b, "\n## Install\n\n```sh\n"+
		"kubectl apply --server-side -f %s/lock-guard.yaml   # with clusterctl: the guard first, and again before each upgrade\n"+
		"clusterctl init --addon initlock   # with the provider in clusterctl.yaml, see docs/install.md\n"+
		"kubectl apply --server-side -f %s/install.yaml\n"+
		"velero plugin add %s   # restarts Velero: run it when no backup or restore is in progress\n"+
		"kubectl krew install --manifest-url=%s/initlock.yaml\n"+
		"kubectl apply --server-side -f %s/monitoring.yaml   # optional, with the Prometheus Operator: see docs/install.md#with-the-prometheus-operator\n```\n\n"+
		"The Velero plugin is named by digest alone: Velero derives its init container's name from the reference.\n\n",
		url, url, byDigest(refs[PluginImage]), url, url)
	b.WriteString(changes)
	return os.WriteFile(filepath.Join(r.o.out, "release-notes.md"), []byte(b.String()), 0o644)
}

// byDigest returns REPOSITORY@DIGEST of a REPOSITORY:TAG@DIGEST reference.
func byDigest(ref string) string {
	name, digest, ok := strings.Cut(ref, "@")
	if i := strings.LastIndex(name, ":"); ok && i > strings.LastIndex(name, "/") {
		name = name[:i]
	}
	return name + "@" + digest
}

// checksums writes checksums.txt: the sha256 of every other file under
// out, in the format of sha256sum, so that "sha256sum -c checksums.txt"
// checks them from out.
func (r *release) checksums() error {
	var names []string
	err := filepath.WalkDir(r.o.out, func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		rel, err := filepath.Rel(r.o.out, path)
		if err != nil || rel == "checksums.txt" {
			return err
		}
		names = append(names, filepath.ToSlash(rel))
		return nil
	})
	if err != nil {
		return err
	}
	slices.Sort(names)
	var b strings.Builder
	for _, n := range names {
		sum, err := sha256File(filepath.Join(r.o.out, n))
		if err != nil {
			return err
		}
		fmt.Fprintf(&b, "%s  %s\n", sum, n)
	}
	return os.WriteFile(filepath.Join(r.o.out, "checksums.txt"), []byte(b.String()), 0o644)
}

func sha256File(path string) (string, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return "", err
	}
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:]), nil
}
