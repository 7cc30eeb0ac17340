package protection

import (
	"bytes"
	_ "embed" // the lock guard is embedded
)

// LockGuardFile is the lock guard's file, relative to the repository root.
const LockGuardFile = "config/protection/lock-guard.yaml"

//go:embed lock-guard.yaml
var lockGuard []byte

// LockGuard returns the bytes of LockGuardFile as the binary was built
// with them: a copy, which the caller may change.
func LockGuard() []byte { return bytes.Clone(lockGuard) }
