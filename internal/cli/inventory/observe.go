package inventory

import (
	"context"
	"errors"
	"fmt"

	"github.com/initlock/initlock/pkg/initlock"

	"github.com/initlock/initlock/pkg/initlock/capi"
	"github.com/initlock/initlock/pkg/initlock/engine"
)

// Observe reads one cluster's lock live, with engine.Read: the ConfigMap
// with its lock name, the Cluster, and the Machines the lock and the
// Cluster's grant register name. It is what a caller does after a
// conflict. The Cluster and the ConfigMap may each be missing; clusterName
// must be a valid cluster name.
func Observe(ctx context.Context, c Reader, version, namespace, clusterName string) (Entry, error) {
	if version == "" {
		return Entry{}, fmt.Errorf("observing the init lock of cluster %s/%s: no Cluster API version given: discover the one the API server serves (capi.Discover)", namespace, clusterName)
	}
	return observe(ctx, engine.From(c), version, namespace, clusterName)
}

func observe(ctx context.Context, src engine.Source, version, namespace, clusterName string) (Entry, error) {
	lockName, err := initlock.LockName(clusterName)
	if err != nil {
		return Entry{}, err
	}
	obs, cm, err := engine.Read(ctx, src, engine.Query{Namespace: namespace, ClusterName: clusterName,
		APIVersion: capi.Group + "/" + version})
	if re := (*engine.ReadError)(nil); errors.As(err, &re) {
		return Entry{}, GetError(re.Err, re.Kind, re.Resource, re.Group, re.Namespace, re.Name)
	}
	if err != nil {
		return Entry{}, err
	}
	return Entry{Namespace: namespace, ClusterName: clusterName, LockName: lockName, ConfigMap: cm, Observation: obs}, nil
}
