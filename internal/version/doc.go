// Package version tells which build of initlock is running: the version a
// release sets at link time, else the module version or VCS revision Go
// recorded, else "dev". Every initlock binary reports it the same way
// (initlock-manager --version and its initlock_build_info metric,
// kubectl initlock version).
//
// A release build sets it with
//
//	-ldflags "-X github.com/initlock/initlock/internal/version.version=v0.1.0 -X github.com/initlock/initlock/internal/version.revision=<commit>"
//
// It guarantees that Get never fails and never returns an empty version. It
// does not check that a version set at link time is a valid semantic
// version.
package version
