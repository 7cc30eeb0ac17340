package stack

import (
	"embed"
	"fmt"
	"os"
	"path/filepath"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"sigs.k8s.io/yaml"

	"github.com/initlock/initlock/internal/kubeenv"
)

// The module folders the stack's manifests come from, as pinned by the
// tools modules that build the binaries.
const (
	capiModule   = "sigs.k8s.io/cluster-api"
	veleroModule = "github.com/vmware-tanzu/velero"
)

// ContractLabel marks a provider's CRD with the version of it that
// implements Cluster API's v1beta2 contract; kustomize adds it upstream.
const ContractLabel = "cluster.x-k8s.io/v1beta2"

// InfraGroup and InfraVersion are those of the minimal infrastructure
// provider of the stack: LocalCluster and LocalMachine, which nothing
// reconciles; a test sets their status as a provider would.
const (
	InfraGroup   = "infrastructure.initlock.dev"
	InfraVersion = "v1alpha1"
)

//go:embed manifests/*.yaml
var manifests embed.FS

// CRDDirs writes into dir the CRDs a management cluster of the stack needs
// beside Cluster API's core CRDs (which kubeenv installs): the kubeadm
// bootstrap provider's, with the contract label; the infrastructure CRDs of
// the stack; and Velero's 13. It returns the folders to pass as
// kubeenv.Options.CRDDirs, so that they exist before the garbage collector
// starts.
func CRDDirs(dir string) ([]string, error) {
	capiDir, err := kubeenv.ModuleDir("hack/capi", capiModule)
	if err != nil {
		return nil, err
	}
	veleroDir, err := kubeenv.ModuleDir("hack/pins/velero", veleroModule)
	if err != nil {
		return nil, err
	}
	out := filepath.Join(dir, "crds")
	if err := os.MkdirAll(out, 0o700); err != nil {
		return nil, err
	}
	bootstrap := filepath.Join(capiDir, "bootstrap", "kubeadm", "config", "crd", "bases")
	entries, err := os.ReadDir(bootstrap)
	if err != nil {
		return nil, fmt.Errorf("reading the kubeadm bootstrap CRDs: %w", err)
	}
	for _, e := range entries {
		if filepath.Ext(e.Name()) != ".yaml" {
			continue
		}
		if err := labelCRD(filepath.Join(bootstrap, e.Name()), filepath.Join(out, e.Name())); err != nil {
			return nil, err
		}
	}
	infra, err := manifests.ReadDir("manifests")
	if err != nil {
		return nil, err
	}
	for _, e := range infra {
		b, err := manifests.ReadFile("manifests/" + e.Name())
		if err != nil {
			return nil, err
		}
		if err := os.WriteFile(filepath.Join(out, e.Name()), b, 0o600); err != nil {
			return nil, err
		}
	}
	return []string{
		out,
		filepath.Join(veleroDir, "config", "crd", "v1", "bases"),
		filepath.Join(veleroDir, "config", "crd", "v2alpha1", "bases"),
	}, nil
}

// labelCRD copies a CRD, adding the contract label with its storage
// version, as Cluster API's kustomization does.
func labelCRD(from, to string) error {
	b, err := os.ReadFile(from)
	if err != nil {
		return err
	}
	crd := &apiextensionsv1.CustomResourceDefinition{}
	if err := yaml.Unmarshal(b, crd); err != nil {
		return fmt.Errorf("reading CRD %s: %w", from, err)
	}
	version := ""
	for _, v := range crd.Spec.Versions {
		if v.Storage {
			version = v.Name
		}
	}
	if crd.Labels == nil {
		crd.Labels = map[string]string{}
	}
	crd.Labels[ContractLabel] = version
	out, err := yaml.Marshal(crd)
	if err != nil {
		return err
	}
	return os.WriteFile(to, out, 0o600)
}
