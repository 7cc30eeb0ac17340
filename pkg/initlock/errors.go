package initlock

import (
	"github.com/initlock/initlock/pkg/initlock/internal/engine"
	"github.com/initlock/initlock/pkg/initlock/internal/report"
)

// Sentinel errors. Test for them with errors.Is; the errors Lock and Unlock
// return wrap them in an *Error that names the object and the way out.
var (
	// ErrNotALock: a ConfigMap has the lock's name but lacks the
	// cluster-name label or the lock-information key. It is never modified.
	ErrNotALock = report.ErrNotALock
	// ErrCorruptLock: a lock's record, or the Cluster's grant register,
	// cannot be read. It is never taken over silently.
	ErrCorruptLock = report.ErrCorruptLock
	// ErrClusterPaused: the Cluster is paused; nothing was changed.
	ErrClusterPaused = report.ErrClusterPaused
	// ErrInvalidName: a cluster or machine name cannot be used for a lock;
	// returned before any API call.
	ErrInvalidName = report.ErrInvalidName
	// ErrNotHolder: Unlock was asked to release a lock on behalf of a
	// Machine that does not hold it.
	ErrNotHolder = report.ErrNotHolder
	// ErrClusterGone: Lock was called for a Cluster that no longer exists.
	ErrClusterGone = report.ErrClusterGone
	// ErrStaleMachine: the Machine object is not the live Machine of that
	// name (deleted, re-created or restored since it was read). Nothing was
	// granted or released; call again with the live object.
	ErrStaleMachine = report.ErrStaleMachine
	// ErrStaleCluster: Unlock was called with a Cluster object that is not
	// the live Cluster of that name. Nothing was released.
	ErrStaleCluster = report.ErrStaleCluster
	// ErrContended: Lock or Unlock gave up after rounds in a row that did
	// not settle, the last of them having lost an optimistic-concurrency
	// race, whose error it wraps too. Calling again is safe. Any other
	// error that kept the call from settling (a timeout, a server error) is
	// returned as itself, wrapped.
	ErrContended = report.ErrContended
)

// Error is the error Lock and Unlock return for a problem with a
// particular object: its namespace, name and kind, what is wrong and what
// to do, and the sentinel or API error it wraps.
type Error = report.Error

// LockName returns the name of cluster's lock ConfigMap, "<cluster>-lock",
// or an error wrapping ErrInvalidName when no valid lock can carry that
// cluster's name.
func LockName(cluster string) (string, error) { return engine.LockName(cluster) }
