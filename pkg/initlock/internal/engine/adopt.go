package engine

import (
	"context"
	"fmt"

	"sigs.k8s.io/controller-runtime/pkg/client"
)

// Adopt re-adopts cluster's lock for the live Cluster, as a keeper does,
// and makes no other write: it never creates, grants, takes over or
// releases a lock, and never writes the grant register. It decides as a
// keeper that does not release a lock after init (Policy.ReleaseAfterInit
// false, the default grace period) and acts only when that decision is an
// adoption, which Keep confirms on the Cluster read live and writes as a
// patch conditional on the lock's resourceVersion, which takes off the
// marks an adoption takes off. So, while the control plane is not
// initialised, a lock whose holder is gone and that no grant protects is
// left to the next Lock (which takes it over, owned) or to a keeper. It returns whether it wrote the lock;
// errors wrap initlock.ErrClusterPaused, initlock.ErrNotALock,
// initlock.ErrCorruptLock (a lock that cannot be read, or a damaged grant
// register) or an API error.
func (l *Env) Adopt(ctx context.Context, clusterObj client.Object) (bool, error) {
	cl, err := ClusterFrom(clusterObj, l.Client.Scheme())
	if err != nil {
		return false, err
	}
	if cl.Paused {
		return false, pausedError(cl)
	}
	o, cm, err := Read(ctx, From(l.Reader), Query{Namespace: cl.Namespace, ClusterName: cl.Name, APIVersion: cl.APIVersion})
	if err != nil {
		return false, err
	}
	p := Policy{OrphanGrace: DefaultPolicy.OrphanGrace}
	now := l.Clock.Now()
	d := Decide(o, p, now)
	if d.Action != ActionAdopt {
		return false, d.Err
	}
	if _, _, err := Keep(ctx, l.Reader, l.Client, cm, o, d, p, now); err != nil {
		return false, fmt.Errorf("adopting lock %s/%s: %w", cm.Namespace, cm.Name, err)
	}
	return true, nil
}
