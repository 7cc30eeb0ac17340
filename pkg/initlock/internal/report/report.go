package report

import (
	"errors"
	"fmt"

	"k8s.io/client-go/tools/events"
)

// Sentinel errors. Test for them with errors.Is; the errors Lock and Unlock
// return wrap them in an *Error that names the object and the way out.
var (
	// ErrNotALock means a ConfigMap has the lock's name but is not an init
	// lock: it lacks the cluster-name label or the lock-information key. It
	// is never modified or deleted.
	ErrNotALock = errors.New("not an init lock")
	// ErrCorruptLock means a lock's lock-information is not valid JSON or
	// names no machine. It is never taken over silently.
	ErrCorruptLock = errors.New("corrupt lock")
	// ErrClusterPaused means the Cluster is paused (spec.paused or the
	// cluster.x-k8s.io/paused annotation), so nothing was changed.
	ErrClusterPaused = errors.New("cluster is paused")
	// ErrInvalidName means a cluster or machine name cannot be used for a
	// lock; it is returned before any API call.
	ErrInvalidName = errors.New("invalid name")
	// ErrNotHolder means Unlock was asked to release a lock on behalf of a
	// machine that does not hold it.
	ErrNotHolder = errors.New("machine does not hold the lock")
	// ErrClusterGone means Lock was called for a Cluster that no longer
	// exists; nothing was changed.
	ErrClusterGone = errors.New("cluster does not exist")
	// ErrStaleMachine means Lock was called with a Machine object that is
	// not the live Machine of that name: the Machine was deleted, or
	// deleted and created again (a new UID), since the caller read it.
	// Nothing was granted; call again with the live object.
	ErrStaleMachine = errors.New("machine object is stale")
	// ErrStaleCluster means Unlock was called with a Cluster object that is
	// not the live Cluster of that name: it was deleted and created again,
	// restored from a backup or moved since the caller read it. Nothing was
	// released; call again with the live object.
	ErrStaleCluster = errors.New("cluster object is stale")
	// ErrContended means Lock or Unlock gave up after 8 rounds in a row that
	// did not settle, the last of them having lost a race (a conflict, a
	// failed test of a compare-and-swap, an object that appeared or went
	// away since it was read); the error also wraps that race's error.
	// Calling again is safe. A call whose last round failed otherwise (a
	// timeout, a server error, a refusal the client made) returns that
	// error itself, wrapped, not ErrContended.
	ErrContended = errors.New("lock is contended")
)

// Error is the error Lock, Unlock and Apply return for a problem with a
// particular object. Err is one of the sentinels above or an API error.
type Error struct {
	// Namespace and Name of the object concerned (usually the lock).
	Namespace, Name string
	// Kind of the object concerned, in lower case: "configmap", "cluster"
	// or "machine".
	Kind string
	// Detail says what is wrong and what to do about it.
	Detail string
	// Err is the sentinel or the underlying error.
	Err error
}

func (e *Error) Error() string {
	return fmt.Sprintf("namespace %q: %s %q: %v: %s", e.Namespace, e.Kind, e.Name, e.Err, e.Detail)
}

// Unwrap returns the sentinel or the underlying error.
func (e *Error) Unwrap() error { return e.Err }

// EventRecorder is what Lock, Unlock and a keeper emit events through.
type EventRecorder = events.EventRecorder

// Event reasons Lock and Unlock emit on the Cluster when given an EventRecorder.
const (
	EventLockAcquired  = "LockAcquired"
	EventLockTakenOver = "LockTakenOver"
	EventLockAdopted   = "LockAdopted"
	EventLockRecreated = "LockRecreated"
	EventLockReleased  = "LockReleased"
)

// Event reasons only a keeper emits (package keeper): OrphanLockCollected
// (Normal, on the lock) and the Warnings, on the Cluster, or on the
// ConfigMap when there is no Cluster.
const (
	EventOrphanLockCollected = "OrphanLockCollected"
	EventCorruptLock         = "CorruptLock"
	EventForeignConfigMap    = "ForeignConfigMap"
	EventLockConflict        = "LockConflict"
	EventLockUnmarked        = "LockUnmarked"
)
