package keeper

import (
	"context"
	"errors"
	"time"

	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/initlock/initlock/pkg/initlock/internal/engine"
)

// Apply makes the writes of keeper decision s (Query.Release false),
// through c, which must write to and read from the API server directly.
// It first confirms the decision against the Cluster and the Machines as
// they are at now, read through c: s may be minutes old. A release or a
// collection marks the lock, reads the Cluster and the Machines again and
// only then deletes it, with the lock's UID and resourceVersion as
// preconditions; the writes of an adoption, an unmarking or an orphan's
// mark are patches conditional on the resourceVersion s read. It returns
// the Status as confirmed: when its Action is not s's, the API server's
// Cluster or Machines decide another action now, and s's decision was not
// carried out: nothing was written, or a release's mark was written and,
// the Cluster or the Machines read again after it deciding otherwise,
// taken off again (left for a keeper to take off once the Cluster is
// unpaused, when it was paused meanwhile). A Conflict or a NotFound error
// means that the lock changed since s was read: Inspect it again.
func Apply(ctx context.Context, c client.Client, s Status, now time.Time) (Status, error) {
	obs, d, err := engine.Keep(ctx, c, c, s.ConfigMap, s.obs, s.d, s.Query.Policy.engine(), now)
	q := s.Query
	q.Now = now
	if errors.Is(err, engine.ErrNotConfirmed) {
		err = nil
	}
	return describe(q, s.ConfigMap, obs, d, true), err
}
