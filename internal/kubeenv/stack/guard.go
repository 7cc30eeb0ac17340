package stack

import "context"

// InstallLockGuard installs initlock's lock guard (config/protection: the
// admission policy that refuses the delete of a lock not marked for
// release, and its binding) in the management cluster, as config/default
// installs it, and returns once the API server enforces it. Installing it
// again is no error.
func (m *Mgmt) InstallLockGuard(ctx context.Context) error {
	if err := m.Env.InstallLockGuard(ctx); err != nil {
		return err
	}
	m.guarded = true
	return nil
}

// RemoveLockGuard deletes the lock guard's binding, then its policy, and
// returns once the API server no longer enforces it. A guard that is not
// installed is no error.
func (m *Mgmt) RemoveLockGuard(ctx context.Context) error {
	if err := m.Env.UninstallLockGuard(ctx); err != nil {
		return err
	}
	m.guarded = false
	return nil
}
