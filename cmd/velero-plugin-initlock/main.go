// Command velero-plugin-initlock is initlock's Velero plugin. Velero runs it
// from its plugin folder; it serves two RestoreItemActions that record the
// backed-up ownerReferences of Cluster API objects, and of the ConfigMaps and
// Secrets of a Cluster, for the relinker of initlock-manager. See
// internal/velero for what they do and for the environment variables that
// configure them.
package main

import (
	"fmt"
	"os"

	"github.com/vmware-tanzu/velero/pkg/plugin/framework"

	"github.com/initlock/initlock/internal/velero"
)

func main() {
	cfg, err := velero.ConfigFromEnv(os.Getenv)
	if err != nil {
		fmt.Fprintf(os.Stderr, "velero-plugin-initlock: %v\n", err)
		os.Exit(2)
	}
	velero.Register(framework.NewServer(), cfg).Serve()
}
