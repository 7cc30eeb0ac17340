package chaos

import (
	"fmt"
	"time"
)

// The invariants the Checker enforces.
const (
	// InvNoOverlap: two distinct Machines never hold a cluster's lock at
	// once.
	InvNoOverlap = 1
	// InvSettled: once settled, no lock is left whose Cluster is gone or
	// whose Cluster is initialised.
	InvSettled = 2
	// InvForeignUntouched: no ConfigMap that is not a lock is modified or
	// deleted.
	InvForeignUntouched = 3
	// InvNoUnsafeDelete: initlock deletes no lock while its holder exists and
	// its Cluster exists, uninitialised and not being deleted, except by the
	// holder's own Unlock.
	InvNoUnsafeDelete = 4
	// InvRightOwner: the relinker links a restored add-on ConfigMap only to
	// the Cluster the same restore created, or to the Cluster it was backed
	// up with; once settled, every restored add-on whose restore's Cluster
	// exists is linked to it (relinks.go).
	InvRightOwner = 5
)

// Violation is a broken invariant.
type Violation struct {
	Invariant int
	At        time.Duration
	Message   string
}

func (v Violation) String() string {
	return fmt.Sprintf("invariant %d broken at %.3fs: %s", v.Invariant, v.At.Seconds(), v.Message)
}
