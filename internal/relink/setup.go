package relink

import (
	"context"

	ctrl "sigs.k8s.io/controller-runtime"
)

// ManagerSetup returns a function that adds a Relinker with opts to a
// manager; its signature is that of initlock-manager's manager.Setup, so
// it can be listed in manager.Options.Setups. The Cluster API version the
// manager discovered is not needed: kinds without a version are resolved
// against the API server.
func ManagerSetup(opts Options) func(mgr ctrl.Manager, capiVersion string) error {
	return func(mgr ctrl.Manager, _ string) error {
		return New(opts).SetupWithManager(context.Background(), mgr)
	}
}
