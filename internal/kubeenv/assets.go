package kubeenv

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
)

// Versions of the control plane the project is tested against. hack/kube.sh
// builds exactly these.
const (
	KubeVersion = "v1.37.2"
	EtcdVersion = "3.7.3"
)

// CAPI selects the Cluster API CRDs an Env installs.
type CAPI string

const (
	// CAPIV1Beta2 installs the CRDs of Cluster API v1.14.2, which store
	// v1beta2 and still serve v1beta1.
	CAPIV1Beta2 CAPI = "v1beta2"
	// CAPIV1Beta1 installs the CRDs of Cluster API v1.8.4, which serve only
	// v1beta1, as older management clusters do.
	CAPIV1Beta1 CAPI = "v1beta1"
	// CAPIV1Beta2Core installs only the core CRDs of Cluster API v1.14.2,
	// for a caller that installs its providers' CRDs itself (the real
	// stack, with their contract labels).
	CAPIV1Beta2Core CAPI = "v1beta2-core"
	// CAPINone installs no Cluster API CRDs.
	CAPINone CAPI = "none"
)

// AssetsDir returns the folder holding etcd, kube-apiserver and
// kube-controller-manager: $KUBEBUILDER_ASSETS when set, else the cache that
// hack/kube.sh fills. It fails, naming the fix, when a binary is missing.
func AssetsDir() (string, error) {
	dir := os.Getenv("KUBEBUILDER_ASSETS")
	if dir == "" {
		cache := os.Getenv("XDG_CACHE_HOME")
		if cache == "" {
			home, err := os.UserHomeDir()
			if err != nil {
				return "", fmt.Errorf("locating the binary cache: %w", err)
			}
			cache = filepath.Join(home, ".cache")
		}
		dir = filepath.Join(cache, "initlock", "kube-"+KubeVersion+"-etcd-"+EtcdVersion)
		if d := os.Getenv("INITLOCK_KUBE_DIR"); d != "" {
			dir = d
		}
	}
	for _, b := range []string{"etcd", "kube-apiserver", "kube-controller-manager"} {
		if _, err := os.Stat(filepath.Join(dir, b)); err != nil {
			return "", fmt.Errorf("control-plane binary %s not found in %s: run 'make kube' to build it", b, dir)
		}
	}
	return dir, nil
}

// RepoRoot returns the root of the initlock work tree, found by walking up
// from the working directory to the go.mod of this module.
func RepoRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		b, err := os.ReadFile(filepath.Join(dir, "go.mod"))
		if err == nil && bytes.HasPrefix(b, []byte("module github.com/initlock/initlock\n")) {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", errors.New("not inside the initlock work tree (no go.mod of github.com/initlock/initlock above the working directory)")
		}
		dir = parent
	}
}

// CRDDirs returns the folders of Cluster API CRDs for c. The module is
// located with 'go mod download -json' in the pinned tools module, which
// reads the local module cache and fetches it from the module proxy only
// when it is missing. $INITLOCK_CAPI_CRDS (for v1beta2) and
// $INITLOCK_CAPI_V1BETA1_CRDS override it.
func CRDDirs(c CAPI) ([]string, error) {
	var env, mod, sub string
	switch c {
	case CAPINone:
		return nil, nil
	case CAPIV1Beta2, CAPIV1Beta2Core, "":
		env, mod, sub = "INITLOCK_CAPI_CRDS", "hack/capi", "core/config/crd/bases"
	case CAPIV1Beta1:
		env, mod, sub = "INITLOCK_CAPI_V1BETA1_CRDS", "hack/pins/capi-v1beta1", "config/crd/bases"
	default:
		return nil, fmt.Errorf("unknown Cluster API CRD set %q", c)
	}
	if d := os.Getenv(env); d != "" {
		return []string{d}, nil
	}
	dir, err := ModuleDir(mod, "sigs.k8s.io/cluster-api")
	if err != nil {
		return nil, err
	}
	dirs := []string{filepath.Join(dir, sub)}
	if c == CAPIV1Beta2 || c == "" {
		// CABPK's KubeadmConfig, the bootstrap configuration the tests
		// give Machines, back up, restore and relink (initlock-manager
		// reads none).
		dirs = append(dirs, filepath.Join(dir, "bootstrap/kubeadm/config/crd/bases"))
	}
	return dirs, nil
}

// ModuleDir returns the folder of module path as required by the tools
// module in repoRel (a path relative to the repository root), that module
// resolved on its own: go.work does not change the version it pins.
func ModuleDir(repoRel, path string) (string, error) {
	root, err := RepoRoot()
	if err != nil {
		return "", err
	}
	cmd := exec.Command("go", "mod", "download", "-json", path)
	cmd.Dir = filepath.Join(root, repoRel)
	cmd.Env = append(os.Environ(), "GOFLAGS=-mod=mod", "GOWORK=off")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return "", fmt.Errorf("locating %s with 'go mod download' in %s: %w: %s", path, repoRel, err, stderr.String())
	}
	var info struct{ Dir, Error string }
	if err := json.Unmarshal(out, &info); err != nil {
		return "", fmt.Errorf("reading 'go mod download' output for %s: %w", path, err)
	}
	if info.Error != "" || info.Dir == "" {
		return "", fmt.Errorf("locating %s in %s: %s", path, repoRel, info.Error)
	}
	return info.Dir, nil
}

// ReadObjects reads the objects of a YAML (or JSON) file of several
// documents, as kubectl apply -f reads them; empty documents are skipped.
func ReadObjects(path string) ([]*unstructured.Unstructured, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	dec := utilyaml.NewYAMLOrJSONDecoder(bytes.NewReader(b), 4096)
	var out []*unstructured.Unstructured
	for {
		u := &unstructured.Unstructured{}
		if err := dec.Decode(&u.Object); errors.Is(err, io.EOF) {
			return out, nil
		} else if err != nil {
			return nil, fmt.Errorf("reading %s: %w", path, err)
		}
		if len(u.Object) > 0 {
			out = append(out, u)
		}
	}
}
