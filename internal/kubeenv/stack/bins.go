package stack

import (
	"fmt"
	"os"
	"path/filepath"
)

// Versions of the third-party binaries hack/stack.sh builds.
const (
	VeleroVersion    = "v1.18.3"
	VeleroAWSVersion = "v1.14.3"
	CAPIVersion      = "v1.14.2"
)

// The binaries of the stack, by their file names in the cache.
const (
	BinVelero    = "velero"
	BinVeleroAWS = "velero-plugin-for-aws"
	BinS3        = "s3-server"
	BinCABPK     = "capi-kubeadm-bootstrap-manager"
	BinCore      = "capi-manager"
)

// Binaries locate the programs a Stack runs.
type Binaries struct {
	// Dir holds the third-party binaries: $INITLOCK_STACK_DIR, else the
	// cache that hack/stack.sh fills.
	Dir string
	// Manager and VeleroPlugin are initlock-manager and
	// velero-plugin-initlock, built from this work tree by the caller
	// (make test-real and make demo-real build them into a temporary
	// folder); $INITLOCK_MANAGER and $INITLOCK_VELERO_PLUGIN by default.
	Manager, VeleroPlugin string
}

// FindBinaries locates the binaries and fails, naming the fix, when one is
// missing.
func FindBinaries() (Binaries, error) {
	b := Binaries{Dir: os.Getenv("INITLOCK_STACK_DIR"), Manager: os.Getenv("INITLOCK_MANAGER"), VeleroPlugin: os.Getenv("INITLOCK_VELERO_PLUGIN")}
	if b.Dir == "" {
		cache := os.Getenv("XDG_CACHE_HOME")
		if cache == "" {
			home, err := os.UserHomeDir()
			if err != nil {
				return b, fmt.Errorf("locating the binary cache: %w", err)
			}
			cache = filepath.Join(home, ".cache")
		}
		b.Dir = filepath.Join(cache, "initlock", "stack")
	}
	for _, n := range []string{BinVelero, BinVeleroAWS, BinS3, BinCABPK, BinCore} {
		if _, err := os.Stat(filepath.Join(b.Dir, n)); err != nil {
			return b, fmt.Errorf("%s not found in %s: run 'make stack' (hack/stack.sh) to build it", n, b.Dir)
		}
	}
	for name, p := range map[string]string{"INITLOCK_MANAGER (initlock-manager)": b.Manager, "INITLOCK_VELERO_PLUGIN (velero-plugin-initlock)": b.VeleroPlugin} {
		if p == "" {
			return b, fmt.Errorf("$%s is not set: run the suite with 'make test-real', which builds it", name)
		}
		if _, err := os.Stat(p); err != nil {
			return b, fmt.Errorf("$%s: %w", name, err)
		}
	}
	return b, nil
}

func (b Binaries) path(name string) string { return filepath.Join(b.Dir, name) }
