package velero

import (
	"context"

	"github.com/sirupsen/logrus"
	"github.com/vmware-tanzu/velero/pkg/plugin/framework"
)

// Register adds both actions to a Velero plugin server. Velero creates the
// actions for each restore; each then reads its Config with the Settings
// settings returns, so that a change of the settings ConfigMap applies
// from the next restore on. An error there fails the restore with it.
func Register(s framework.Server, settings func() (Settings, error)) framework.Server {
	initializer := func(labelled bool) func(logrus.FieldLogger) (any, error) {
		return func(log logrus.FieldLogger) (any, error) {
			st, err := settings()
			if err != nil {
				return nil, err
			}
			cfg, err := st.Load(context.Background(), log)
			if err != nil {
				return nil, err
			}
			return NewAction(cfg, labelled, log), nil
		}
	}
	return s.
		RegisterRestoreItemActionV2(ActionName, initializer(false)).
		RegisterRestoreItemActionV2(LabelledActionName, initializer(true))
}
