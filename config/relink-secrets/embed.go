package relinksecrets

import (
	"bytes"
	_ "embed" // the opt-in role is embedded
)

//go:embed role.yaml
var role []byte

// Role returns role.yaml as the binary was built with it: the opt-in
// ClusterRole that lets the relinker link Secrets. A copy, which the
// caller may change.
func Role() []byte { return bytes.Clone(role) }
