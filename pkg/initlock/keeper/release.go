package keeper

import (
	"context"
	"errors"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/initlock/initlock/pkg/initlock"
	"github.com/initlock/initlock/pkg/initlock/capi"
	"github.com/initlock/initlock/pkg/initlock/internal/engine"
)

// Release is an operator's release (kubectl initlock release) of what s,
// an operator's release decision (Inspect with Query.Release), found: the
// lock, whoever holds it, and the Cluster's grant register. It writes
// through c, which must write to and read from the API server directly,
// as initlock.Locker.Unlock does, and releases only what s inspected:
//
//   - a lock whose UID or resourceVersion is no longer s's, a lock found
//     where s found none, or a grant register that no longer holds what s
//     read, ends it with a Conflict error before any write;
//   - without Query.Force, it reads the Machines the lock and the grant
//     name live in each round, and again between the lock's release mark
//     and its delete, and stops (initlock.ErrNotHolder, its mark taken off
//     again) once one exists: a holder restored while the release runs
//     keeps its lock;
//   - a lock or a grant that another writer rewrote for the same Machine
//     during the release ends it with a Conflict error; one that another
//     Machine took since, like one gone, ends it as done, nothing more
//     released: Inspect again to see what stands.
//
// The Cluster is bound by its grant register's value, not by its UID: a
// Cluster created again with the same register is released as the one
// inspected.
//
// Errors also wrap initlock.ErrClusterPaused (nothing is started while the
// Cluster is paused), initlock.ErrNotALock and initlock.ErrCorruptLock. A
// pause that lands once the register's write is made does not stop the
// lock's delete. opts configure the release as they configure a Locker.
func Release(ctx context.Context, c client.Client, s Status, opts ...initlock.Option) error {
	if !s.Query.Release {
		return errors.New("keeper.Release needs the Status of an operator's release: Inspect it with Query.Release")
	}
	raw := s.Grant
	p := engine.UnlockParams{Operator: true, Force: s.Query.Force, Register: &raw}
	if s.LockExists {
		p.UID, p.ResourceVersion = s.LockUID, s.LockResourceVersion
	} else {
		p.NoLock = true
	}
	cl := &unstructured.Unstructured{}
	cl.SetGroupVersionKind(capi.ClusterGVK(s.Query.CAPIVersion))
	cl.SetNamespace(s.Query.Namespace)
	cl.SetName(s.Query.Cluster)
	cl.SetUID(s.ClusterUID)
	env := engine.NewEnv(c)
	for _, o := range opts {
		o(env)
	}
	return env.Unlock(ctx, cl, nil, p)
}
