package inventory

import (
	"context"
	"errors"
	"fmt"
	"strings"

	apierrors "k8s.io/apimachinery/pkg/api/errors"

	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/initlock/initlock/pkg/initlock"
	"github.com/initlock/initlock/pkg/initlock/keeper"
)

// Observe reads one cluster's lock live, with keeper.Inspect: the ConfigMap
// with its lock name, the Cluster, and the Machines the lock and the
// Cluster's grant register name, and decides as q says. It is what a
// caller does after a conflict. The Cluster and the ConfigMap may each be
// missing; q.Cluster must be a valid cluster name.
func Observe(ctx context.Context, c Reader, q keeper.Query) (Entry, error) {
	if q.CAPIVersion == "" {
		return Entry{}, fmt.Errorf("observing the init lock of cluster %s/%s: no Cluster API version given: discover the one the API server serves (capi.Discover)", q.Namespace, q.Cluster)
	}
	return observe(ctx, c, q)
}

func observe(ctx context.Context, r client.Reader, q keeper.Query) (Entry, error) {
	lockName, err := initlock.LockName(q.Cluster)
	if err != nil {
		return Entry{}, err
	}
	s, err := keeper.Inspect(ctx, r, q)
	if st := (*apierrors.StatusError)(nil); errors.As(err, &st) && st.ErrStatus.Details != nil {
		// The API server names the object it refused to give, and its
		// resource, for the permission message.
		d := st.ErrStatus.Details
		return Entry{}, GetError(st, strings.TrimSuffix(d.Kind, "s"), d.Kind, d.Group, q.Namespace, d.Name)
	}
	if err != nil {
		return Entry{}, err
	}
	return Entry{Namespace: q.Namespace, ClusterName: q.Cluster, LockName: lockName, ConfigMap: s.ConfigMap, Status: s}, nil
}
