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

// manifests renders the install manifests with "make manifests", the
// manager image pinned by digest: install.yaml (config/default),
// install-relink-secrets.yaml (config/relink-secrets), the clusterctl
// components addon-components.yaml (config/clusterctl) and the opt-in RBAC
// owner-references-enforcement.yaml (config/owner-references-enforcement),
// and copies
// metadata.yaml once it maps this version's release series to a contract.
func (r *release) manifests(refs map[string]string) error {
	for file, dir := range map[string]string{
		"install.yaml":                      "config/default",
		"install-relink-secrets.yaml":       "config/relink-secrets",
		"addon-components.yaml":             "config/clusterctl",
		"owner-references-enforcement.yaml": "config/owner-references-enforcement",
	} {
		cmd := exec.Command("make", "-s", "manifests", "IMG="+refs[ManagerImage], "KUSTOMIZE_DIR="+dir, "MANIFESTS="+filepath.Join(r.o.out, file))
		cmd.Dir = r.o.root
		cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
		if err := cmd.Run(); err != nil {
			return fmt.Errorf("rendering %s into %s: %w", dir, file, err)
		}
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
