// Command velero-plugin-initlock is initlock's Velero plugin. Velero runs it
// from its plugin folder; it serves two RestoreItemActions that record the
// backed-up ownerReferences of Cluster API objects, and of the ConfigMaps and
// Secrets of a Cluster, for the relinker of initlock-manager. See
// internal/velero for what they do and for the settings ConfigMap that
// configures them.
//
// Velero starts it with the arguments of the Velero server: --log-level is
// honoured, and --kubeconfig, --kubecontext and --namespace (with
// $VELERO_NAMESPACE, $KUBECONFIG and the in-cluster configuration) say
// where its settings ConfigMap is read.
package main

import (
	"os"

	"github.com/spf13/pflag"
	veleroclient "github.com/vmware-tanzu/velero/pkg/client"
	"github.com/vmware-tanzu/velero/pkg/plugin/framework"

	"github.com/initlock/initlock/internal/velero"
)

func main() {
	f := veleroclient.NewFactory("velero-plugin-initlock", veleroclient.VeleroConfig{})
	f.BindFlags(pflag.CommandLine)
	server := framework.NewServer().BindFlags(pflag.CommandLine)
	velero.Register(server, velero.FactorySettings(f, os.Getenv)).Serve()
}
