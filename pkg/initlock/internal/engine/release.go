package engine

import (
	"context"
	"errors"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// ReleaseAnnotation on a lock is its release mark: its value is the lock's
// own UID. initlock's admission policy, initlock-lock-guard
// (config/protection), refuses every delete of a lock that does not carry
// it (but in a namespace being deleted, or by clusterctl move), whoever
// makes it: the garbage collector, a person, a bootstrap provider's own
// release. So every release of initlock (the holder's Unlock, the
// keepers' release after init, of a gone holder's lock, of a deleting
// Cluster's, an orphan's collection) is two writes: the mark, a patch
// conditional on the resourceVersion read, then the delete, conditional
// on the UID and the resourceVersion the mark left. The mark binds to the
// lock's UID: a copy restored from a backup, which has a new UID, is not
// marked.
const ReleaseAnnotation = AnnotationPrefix + "releasable"

// ReleaseStartedAnnotation records, with the release mark, when the
// release began (RFC 3339). A keeper leaves a mark younger than
// ReleaseMarkGrace to the release under way, whose delete follows, and
// takes an older one off a lock it does not release (a release stopped
// half-way); a mark without it is taken off at once.
const ReleaseStartedAnnotation = AnnotationPrefix + "release-started"

// ReleaseMarkGrace is how long a release mark is left to the release that
// wrote it: its delete follows at once, and a release that stops, or whose
// delete fails, takes its mark off itself (releaseChecked), so that only a
// releaser killed, cut off or failed on every try leaves it longer.
const ReleaseMarkGrace = 30 * time.Second

// MoveAnnotation is clusterctl move's mark on the objects it is deleting
// from the source management cluster, after creating them in the target;
// the admission policy lets the delete of a lock carrying it through.
// Adoptions and rewrites take it off a lock whose Cluster is not paused
// (a move pauses it first): a move that failed left it there.
const MoveAnnotation = "clusterctl.cluster.x-k8s.io/delete-for-move"

// releaseLock deletes lock cm as read: it writes the release mark,
// conditional on the resourceVersion read (unless cm carries it already),
// then deletes the lock, conditional on the UID and the resourceVersion
// the mark left. A lock that changed since it was read is neither marked
// nor deleted (Conflict).
func releaseLock(ctx context.Context, c client.Writer, cm *corev1.ConfigMap, now time.Time) error {
	cm, err := markLock(ctx, c, cm, now)
	if err != nil {
		return err
	}
	return deleteMarked(ctx, c, cm)
}

// releaseChecked deletes lock cm the way a release that decides again
// once it has marked the lock does: the mark (markLockLive), then check on
// the lock as marked, then the delete when check lets the release go on
// (nil). A check that stops the release returns why, and whether the mark
// is to be taken off again (takeMarkOff, on a context that outlives ctx's
// cancellation by unmarkTimeout); a delete that fails takes it off too,
// the lock left to the next decision (a delete whose answer was lost and
// that was applied leaves nothing to take off). The stop's error, or
// the delete's, is returned; when the mark could not be taken off, the
// error says that it stays.
func releaseChecked(ctx context.Context, live client.Reader, c client.Writer, cm *corev1.ConfigMap, now time.Time,
	check func(marked *corev1.ConfigMap) (unmark bool, stop error)) error {
	marked, err := markLockLive(ctx, live, c, cm, now)
	if err != nil {
		return err
	}
	unmark, stop := check(marked)
	if stop == nil {
		if stop = deleteMarked(ctx, c, marked); stop == nil || apierrors.IsNotFound(stop) {
			return stop
		}
		unmark = true
	}
	if !unmark {
		return stop
	}
	// The mark comes off even when ctx is done (the manager stopping, a
	// caller's deadline): the unmark outlives it, for unmarkTimeout.
	uctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), unmarkTimeout)
	defer cancel()
	if err := takeMarkOff(uctx, live, c, marked); err != nil {
		// The stop's own error is only told: what the caller must act on
		// is the mark left.
		return fmt.Errorf("%s; its release mark could not be taken off again, and lets a delete of lock %s/%s through until a keeper takes it off (%s after it was written, or kubectl initlock repair): %w",
			stop.Error(), cm.Namespace, cm.Name, ReleaseMarkGrace, err)
	}
	return stop
}

// unmarkTimeout bounds how long a release that stops goes on taking its
// mark off once its caller's context is done.
const unmarkTimeout = 10 * time.Second

// markLockLive is markLock for a release that goes on from the lock as
// marked: when the mark's outcome is not known (a server error, a timeout,
// an answer lost), the lock is read again live (readAgain), and one that
// carries the mark this call wrote (its UID, its release-started) is
// returned as marked, so that the release decides again and then deletes
// it, or takes the mark off, rather than leave it to the next keeper.
func markLockLive(ctx context.Context, live client.Reader, c client.Writer, cm *corev1.ConfigMap, now time.Time) (*corev1.ConfigMap, error) {
	next, err := markLock(ctx, c, cm, now)
	if err == nil || definite(err) {
		return next, err
	}
	again, rerr := readAgain(ctx, live, cm)
	if rerr != nil || again == nil || again.UID != cm.UID || !marked(again) ||
		again.Annotations[ReleaseStartedAnnotation] != now.UTC().Format(time.RFC3339) {
		return nil, errors.Join(err, rerr)
	}
	return again, nil
}

// takeMarkOff takes off lock cm, as a release marked it, that release's
// mark (the release mark and when it began; a move's delete-for-move, or
// any other writer's, stays), conditional on the resourceVersion read.
// While that fails and may succeed on a second try (retryable: another
// writer's change, a server error, a timeout, too many requests), it reads
// the lock again live and tries again, for as long as the lock read is the
// one marked (its UID) and carries that mark (its release-started), up to
// maxAttempts. A lock gone, or marked by another release since, is left as
// it is (nil).
func takeMarkOff(ctx context.Context, live client.Reader, c client.Writer, cm *corev1.ConfigMap) error {
	started := cm.Annotations[ReleaseStartedAnnotation]
	var err error
	for range maxAttempts {
		next := cm.DeepCopy()
		delete(next.Annotations, ReleaseAnnotation)
		delete(next.Annotations, ReleaseStartedAnnotation)
		err = c.Patch(ctx, next, client.MergeFromWithOptions(cm, client.MergeFromWithOptimisticLock{}))
		switch {
		case err == nil || apierrors.IsNotFound(err):
			return nil
		case !retryable(err):
			return err
		}
		again, rerr := readAgain(ctx, live, cm)
		switch {
		case rerr != nil:
			return errors.Join(err, rerr)
		case again == nil || again.UID != cm.UID || !marked(again) || again.Annotations[ReleaseStartedAnnotation] != started:
			return nil
		}
		cm = again
	}
	return err
}

// readAgain reads lock cm live, trying again up to maxAttempts while the
// read fails; nil when it is gone.
func readAgain(ctx context.Context, live client.Reader, cm *corev1.ConfigMap) (*corev1.ConfigMap, error) {
	var err error
	for range maxAttempts {
		var again *corev1.ConfigMap
		if again, err = getConfigMap(ctx, live, cm.Namespace, cm.Name); err == nil {
			return again, nil
		}
	}
	return nil, err
}

// markLock writes the release mark on lock cm, conditional on the
// resourceVersion read, and returns the lock as marked; a lock that
// carries it already is returned as it is.
func markLock(ctx context.Context, c client.Writer, cm *corev1.ConfigMap, now time.Time) (*corev1.ConfigMap, error) {
	if marked(cm) {
		return cm, nil
	}
	next := cm.DeepCopy()
	if next.Annotations == nil {
		next.Annotations = map[string]string{}
	}
	next.Annotations[ReleaseAnnotation] = string(cm.UID)
	next.Annotations[ReleaseStartedAnnotation] = now.UTC().Format(time.RFC3339)
	if err := c.Patch(ctx, next, client.MergeFromWithOptions(cm, client.MergeFromWithOptimisticLock{})); err != nil {
		return nil, err
	}
	return next, nil
}

// deleteMarked deletes marked lock cm, conditional on its UID and the
// resourceVersion the mark left.
func deleteMarked(ctx context.Context, c client.Writer, cm *corev1.ConfigMap) error {
	return c.Delete(ctx, cm, client.Preconditions{UID: &cm.UID, ResourceVersion: &cm.ResourceVersion})
}

// unmarkLock takes the marks off lock cm (dropMarks), conditional on the
// resourceVersion read: a lock that changed since keeps them (Conflict).
func unmarkLock(ctx context.Context, c client.Writer, cm *corev1.ConfigMap) error {
	next := cm.DeepCopy()
	dropMarks(next)
	return c.Patch(ctx, next, client.MergeFromWithOptions(cm, client.MergeFromWithOptimisticLock{}))
}

// dropMarks takes off cm the marks the lock guard lets a delete through
// with: the release mark (and when its release began) and clusterctl
// move's delete-for-move.
func dropMarks(cm *corev1.ConfigMap) {
	delete(cm.Annotations, ReleaseAnnotation)
	delete(cm.Annotations, ReleaseStartedAnnotation)
	delete(cm.Annotations, MoveAnnotation)
}
