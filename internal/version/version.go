package version

import (
	"fmt"
	"runtime"
	"runtime/debug"
)

// Set at link time by release builds (see the package documentation).
var (
	version  string
	revision string
)

// Info describes the running build.
type Info struct {
	// Version is the release version (v0.1.0), the module version, or
	// "dev-<revision>" or "dev" for a build from a work tree.
	Version string
	// Revision is the VCS commit the binary was built from, "" when unknown.
	Revision string
	// GoVersion is the Go toolchain that built it.
	GoVersion string
	// Platform is GOOS/GOARCH.
	Platform string
}

// String is "<version> (<go version>, <os>/<arch>)".
func (i Info) String() string {
	return fmt.Sprintf("%s (%s, %s)", i.Version, i.GoVersion, i.Platform)
}

// Get returns the Info of the running binary.
func Get() Info {
	info := Info{Version: version, Revision: revision, GoVersion: runtime.Version(), Platform: runtime.GOOS + "/" + runtime.GOARCH}
	bi, ok := debug.ReadBuildInfo()
	if ok {
		var dirty string
		for _, s := range bi.Settings {
			switch s.Key {
			case "vcs.revision":
				if info.Revision == "" {
					info.Revision = s.Value
				}
			case "vcs.modified":
				if s.Value == "true" {
					dirty = "-dirty"
				}
			}
		}
		if info.Version == "" {
			if v := bi.Main.Version; v != "" && v != "(devel)" {
				info.Version = v
			} else if info.Revision != "" {
				info.Version = "dev-" + short(info.Revision) + dirty
			}
		}
	}
	if info.Version == "" {
		info.Version = "dev"
	}
	return info
}

func short(rev string) string {
	if len(rev) > 12 {
		return rev[:12]
	}
	return rev
}
