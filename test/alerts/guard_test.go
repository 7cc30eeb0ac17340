package alerts_test

import (
	"context"
	"testing"
	"time"

	"github.com/initlock/initlock/internal/manager"
)

// InitLockGuardMissing stays quiet while the lock guard is installed, and
// fires 15 minutes after the manager finds it gone, not before.
func TestLockGuardMissing(t *testing.T) {
	ns := env.Namespace(t)
	rm, tg := startManager(t, ns, nil)
	waitForMetric(t, tg, manager.LockGuardMetric, nil, 1)
	tl := newTimeline(t)
	tl.scrape(tg)
	tl.hold(30*time.Minute, tg)
	tl.expectQuiet()

	// The guard removed, as an uninstall that leaves the manager does. The
	// manager looks at the guard at start and every five minutes: restart
	// it rather than wait.
	t.Cleanup(func() {
		if err := env.InstallLockGuard(context.WithoutCancel(t.Context())); err != nil {
			t.Error(err)
		}
	})
	env.RemoveLockGuard(t)
	rm.Stop()
	tl.scrape(tg)
	_, next := startManager(t, ns, nil)
	waitForMetric(t, next, manager.LockGuardMetric, nil, 0)
	tl.scrape(tg, next)
	tl.hold(14*time.Minute, tg, next)
	tl.expectQuiet()
	tl.hold(2*time.Minute, tg, next)
	tl.expectFiring("InitLockGuardMissing", map[string]string{"severity": "critical"})
}
