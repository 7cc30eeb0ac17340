package main

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
)

// ProviderLabel marks every object of the clusterctl components, as
// clusterctl labels an add-on provider named initlock.
const ProviderLabel = "cluster.x-k8s.io/provider=addon-initlock"

// MetricsCertPatch is the file of config/monitoring, copied into a release,
// that mounts the operator's metrics certificate into the manager's
// Deployment of install.yaml (docs/install.md#metrics).
const MetricsCertPatch = "metrics-cert-patch.yaml"

// manifests renders the install manifests with "make manifests", the
// manager image pinned by digest: install.yaml (config/default),
// install-relink-secrets.yaml (config/relink-secrets), the clusterctl
// components addon-components.yaml (config/clusterctl), the lock guard
// alone, lock-guard.yaml (config/clusterctl/lock-guard), which clusterctl
// installs do not hold and apply with kubectl, the opt-in RBAC
// owner-references-enforcement.yaml (config/owner-references-enforcement)
// and the optional monitoring, monitoring.yaml (config/monitoring), and
// copies the patch that has the manager serve its metrics with a
// certificate of the operator's, metrics-cert-patch.yaml
// (config/monitoring), and metadata.yaml once it maps this version's
// release series to a contract.
func (r *release) manifests(refs map[string]string) error {
	for file, dir := range map[string]string{
		"install.yaml":                      "config/default",
		"install-relink-secrets.yaml":       "config/relink-secrets",
		"addon-components.yaml":             "config/clusterctl",
		"lock-guard.yaml":                   "config/clusterctl/lock-guard",
		"owner-references-enforcement.yaml": "config/owner-references-enforcement",
		"monitoring.yaml":                   "config/monitoring",
	} {
		cmd := exec.Command("make", "-s", "manifests", "IMG="+refs[ManagerImage], "KUSTOMIZE_DIR="+dir, "MANIFESTS="+filepath.Join(r.o.out, file))
		cmd.Dir = r.o.root
		cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
		if err := cmd.Run(); err != nil {
			return fmt.Errorf("rendering %s into %s: %w", dir, file, err)
		}
	}
	patch, err := os.ReadFile(filepath.Join(r.o.root, "config", "monitoring", MetricsCertPatch))
	if err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(r.o.out, MetricsCertPatch), patch, 0o644); err != nil {
		return err
	}
	b, err := os.ReadFile(filepath.Join(r.o.root, "metadata.yaml"))
	if err != nil {
		return err
	}
	m := semver.FindStringSubmatch(r.o.version)
	series := regexp.MustCompile(`(?m)^- major: ` + m[1] + `\n  minor: ` + m[2] + `\n  contract: v1beta\d+$`)
	if !series.Match(b) {
		return fmt.Errorf("metadata.yaml maps no contract to the release series v%s.%s: add it to releaseSeries", m[1], m[2])
	}
	return os.WriteFile(filepath.Join(r.o.out, "metadata.yaml"), b, 0o644)
}

// archives writes the kubectl-initlock archives, one per platform, holding
// the stripped binary and the licence.
func (r *release) archives() error {
	license, err := os.ReadFile(filepath.Join(r.o.root, "LICENSE"))
	if err != nil {
		return err
	}
	for _, p := range r.o.archivePlatforms {
		dir, err := r.build(p, "kubectl-initlock")
		if err != nil {
			return err
		}
		bin, err := os.ReadFile(filepath.Join(dir, "kubectl-initlock"))
		if err != nil {
			return err
		}
		name := fmt.Sprintf("kubectl-initlock_%s_%s.tar.gz", r.o.version, strings.ReplaceAll(p, "/", "_"))
		if err := writeTarGz(filepath.Join(r.o.out, name), bin, license, r.epoch); err != nil {
			return err
		}
		r.archiveNames[p] = name
	}
	return nil
}
