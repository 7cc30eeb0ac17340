package engine

import (
	"errors"
	"fmt"

	apierrors "k8s.io/apimachinery/pkg/api/errors"

	"github.com/initlock/initlock/pkg/initlock/internal/report"
)

// asStatus finds the API status in err's chain.
func asStatus(err error, target *apierrors.APIStatus) bool {
	return errors.As(err, target)
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
