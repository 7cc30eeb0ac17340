package velero

import (
	"github.com/sirupsen/logrus"
	"github.com/vmware-tanzu/velero/pkg/plugin/framework"
)

// Register adds both actions, configured by cfg, to a Velero plugin server.
func Register(s framework.Server, cfg Config) framework.Server {
	return s.
		RegisterRestoreItemActionV2(ActionName, func(log logrus.FieldLogger) (any, error) {
			return NewAction(cfg, false, log), nil
		}).
		RegisterRestoreItemActionV2(LabelledActionName, func(log logrus.FieldLogger) (any, error) {
			return NewAction(cfg, true, log), nil
		})
}
