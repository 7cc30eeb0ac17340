package rbac

import (
	"bytes"
	_ "embed" // the manager's roles are embedded
)

//go:embed role.yaml
var role []byte

// Role returns role.yaml as the binary was built with it: the manager's
// ClusterRole and its Role in the manager's namespace, which controller-gen
// generates from the kubebuilder markers. A copy, which the caller may
// change.
func Role() []byte { return bytes.Clone(role) }
