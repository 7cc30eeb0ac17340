package engine

import (
	"errors"
	"fmt"
	"net/http"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/initlock/initlock/pkg/initlock/capi"
	"github.com/initlock/initlock/pkg/initlock/internal/report"
)

func (l *Env) event(regarding client.Object, eventtype, reason, note string, args ...any) {
	if l.Recorder == nil {
		return
	}
	l.Recorder.Eventf(regarding, nil, eventtype, reason, "InitLock", note, args...)
}

func pausedError(cl Cluster) error {
	return &report.Error{Namespace: cl.Namespace, Name: cl.Name, Kind: "cluster", Err: report.ErrClusterPaused,
		Detail: "the lock is left as it is; unpause the cluster (spec.paused, annotation " + capi.PausedAnnotation + ") and try again"}
}

// staleMachineError names the object passed and the live Machine.
func staleMachineError(m Machine, live *Machine, what string) error {
	liveDesc := "no Machine of that name exists"
	if live != nil {
		liveDesc = fmt.Sprintf("the live Machine of that name has UID %s", live.UID)
	}
	return &report.Error{Namespace: m.Namespace, Name: m.Name, Kind: "machine", Err: report.ErrStaleMachine,
		Detail: fmt.Sprintf("the object passed has UID %s, but %s (deleted, created again, or restored from a backup); %s", m.UID, liveDesc, what)}
}

// unsettled is the error of a Lock or Unlock whose rounds all ended without
// settling; last is the error of the latest round that failed with one.
// Only a race lost is contention: any other error that kept the call from
// settling to the end is returned as itself, wrapped.
func unsettled(namespace, lockName string, last error) error {
	switch {
	case last == nil:
		return lockError(namespace, lockName, fmt.Errorf("%w: %d rounds in a row did not settle", report.ErrContended, maxAttempts))
	case lostRace(last):
		return lockError(namespace, lockName, fmt.Errorf("%w: %d rounds in a row did not settle (last: %w)", report.ErrContended, maxAttempts, last))
	}
	return lockError(namespace, lockName, fmt.Errorf("%d rounds in a row did not settle, the last failing with: %w", maxAttempts, last))
}

func lockError(namespace, name string, err error) error {
	detail := "inspect it with 'kubectl initlock list'"
	switch {
	case errors.Is(err, report.ErrNotALock):
		detail = "it is not an init lock; refusing to touch it. Rename or remove it, or rename the cluster"
	case errors.Is(err, report.ErrCorruptLock):
		detail = "it is not taken over silently; repair it with 'kubectl initlock release' once no machine is running kubeadm init"
	case errors.Is(err, report.ErrClusterPaused):
		detail = "unpause the cluster and try again"
	case errors.Is(err, report.ErrContended):
		detail = "call again"
	}
	return &report.Error{Namespace: namespace, Name: name, Kind: "configmap", Err: err, Detail: detail}
}

// fatal tells whether one of the errors of a round of writes is a refusal
// that trying again will not change (a permission, say), rather than a
// race lost or a failure whose outcome is unknown.
func fatal(err error) bool {
	var errs []error
	if j, ok := err.(interface{ Unwrap() []error }); ok {
		errs = j.Unwrap()
	} else {
		errs = []error{err}
	}
	for _, e := range errs {
		if definite(e) && !lostRace(e) {
			return true
		}
	}
	return false
}

// retryable tells whether a write that failed with err may succeed when
// made again: its outcome is not known (a server error, a timeout, a
// connection lost), or the server turned it down for now (a conflict with
// another writer's change, too many requests).
func retryable(err error) bool {
	return !definite(err) || apierrors.IsConflict(err) || apierrors.IsTooManyRequests(err)
}

// lostRace tells whether a write failed because what it tested changed
// since it was read: the lock or the register moved on, or the lock
// appeared or went away. Nothing was written.
func lostRace(err error) bool {
	return apierrors.IsConflict(err) || apierrors.IsAlreadyExists(err) || apierrors.IsNotFound(err) || apierrors.IsInvalid(err)
}

// failedTestMessage is what the API server answers, with 422, a JSON patch
// one of whose tests failed (the patch handler's generic response, which
// names neither the resource nor the test). Every other 422 (a schema
// validation, a webhook's field errors) names its object.
const failedTestMessage = "the server rejected our request due to an error in our request"

// testFailed tells whether a JSON patch was refused because one of its
// tests failed: for a claim, the register, the pause state or the UID is no
// longer what the caller saw. internal/kubeenv/apimodel's conformance test
// checks the API server's answer.
func testFailed(err error) bool {
	var status apierrors.APIStatus
	return asStatus(err, &status) && status.Status().Code == http.StatusUnprocessableEntity &&
		status.Status().Message == failedTestMessage
}

// definite tells whether a failed write is known not to have been applied:
// the API server refused it (a 4xx status). Any other failure (5xx, a
// timeout, a broken connection) may come after the write was applied, or
// before it is applied late.
func definite(err error) bool {
	var status apierrors.APIStatus
	if !asStatus(err, &status) {
		return false
	}
	code := status.Status().Code
	return code >= http.StatusBadRequest && code < http.StatusInternalServerError && code != http.StatusRequestTimeout
}

// asStatus finds the API status in err's chain.
func asStatus(err error, target *apierrors.APIStatus) bool {
	return errors.As(err, target)
}
