package cli

import (
	"context"
	"errors"
	"fmt"
	"io"

	"github.com/spf13/pflag"
	apierrors "k8s.io/apimachinery/pkg/api/errors"

	"github.com/initlock/initlock/internal/lockguard"
)

// The states of the lock guard in LockGuardStatus.
const (
	GuardInForce    = "in-force"
	GuardNotInForce = "not-in-force"
	GuardUnknown    = "unknown"
)

// The protection of a lock that no mark lets go (keeper.Status.Protection
// "guarded"), as list shows it: guarded while the lock guard is in force,
// unguarded when it is not, unknown when the command cannot tell.
const (
	protectionGuarded   = "guarded"
	protectionUnguarded = "unguarded"
	protectionUnknown   = "unknown"
)

// guardFlag is the name of the lock guard list and repair check.
type guardFlag struct{ name string }

func (g *guardFlag) add(fs *pflag.FlagSet) {
	fs.StringVar(&g.name, "lock-guard", lockguard.DefaultName,
		"Name of the lock guard's ValidatingAdmissionPolicy and binding, which the command checks are in force (as initlock-manager's --lock-guard).")
}

// lockGuard checks, once, whether the lock guard called name is in force
// (lockguard.Check: two GETs) and says so as a LockGuardStatus; a reader
// without the right to read admission policies is told which it needs,
// and the state is unknown.
func (a *app) lockGuard(ctx context.Context, conn *connection, name string) LockGuardStatus {
	s := LockGuardStatus{Name: name, State: GuardInForce}
	_, err := lockguard.Check(ctx, conn.client, name)
	switch {
	case err == nil:
	case errors.Is(err, lockguard.ErrNotInForce):
		s.State, s.Reason = GuardNotInForce, err.Error()
	case apierrors.IsForbidden(err):
		s.State = GuardUnknown
		s.Reason = fmt.Sprintf(`whether the lock guard is in force is unknown: kubectl-initlock needs "get" on "validatingadmissionpolicies" and "validatingadmissionpolicybindings" (API group "admissionregistration.k8s.io") to read it; ask an administrator to bind a ClusterRole that grants it (check with 'kubectl auth can-i get validatingadmissionpolicies'): %v`, err)
	default:
		s.State, s.Reason = GuardUnknown, fmt.Sprintf("whether the lock guard is in force is unknown: %v", err)
	}
	return s
}

// protection renders the protection p of a lock under the guard's state:
// "guarded" holds only while the guard is in force.
func (s LockGuardStatus) protection(p string) string {
	if p != protectionGuarded {
		return p
	}
	switch s.State {
	case GuardNotInForce:
		return protectionUnguarded
	case GuardUnknown:
		return protectionUnknown
	}
	return p
}

// report says once, on w, why locks are not guarded, or may not be:
// nothing when the guard is in force.
func (s LockGuardStatus) report(w io.Writer) {
	switch s.State {
	case GuardNotInForce:
		_, _ = fmt.Fprintf(w, "Warning: %s. Until then, anyone may delete a held init lock.\n", s.Reason)
	case GuardUnknown:
		_, _ = fmt.Fprintf(w, "Warning: %s.\n", s.Reason)
	}
}
