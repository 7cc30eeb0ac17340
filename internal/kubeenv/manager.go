package kubeenv

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/manager"
)

// Running is a controller-runtime manager a test runs in its own process.
type Running struct {
	Manager manager.Manager
	// Counter counts the manager's requests.
	Counter *Counter

	cancel context.CancelFunc
	done   chan struct{}
	err    error
}

// StartManager builds a manager with build from a copy of cfg whose
// requests are counted, starts it, and stops it when t ends, failing t if
// it stopped (then or before) with an error. It does not wait for the
// manager's cache (WaitForCacheSync).
func StartManager(t testing.TB, cfg *rest.Config, build func(*rest.Config) (manager.Manager, error)) *Running {
	t.Helper()
	c := &Counter{}
	mgr, err := build(c.CountingConfig(cfg))
	if err != nil {
		t.Fatalf("building the manager: %v", err)
	}
	ctx, cancel := context.WithCancel(context.WithoutCancel(t.Context()))
	rm := &Running{Manager: mgr, Counter: c, cancel: cancel, done: make(chan struct{})}
	go func() {
		rm.err = mgr.Start(ctx)
		close(rm.done)
	}()
	t.Cleanup(func() {
		rm.Stop()
		if err := rm.Err(); err != nil {
			t.Error(err)
		}
	})
	return rm
}

// WaitForCacheSync waits a minute at most for the manager's cache to sync,
// and fails t, with the requests refused to the manager, if it does not.
func (rm *Running) WaitForCacheSync(t testing.TB) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	if !rm.Manager.GetCache().WaitForCacheSync(ctx) {
		t.Fatalf("manager cache did not sync within a minute; refused requests: %v", rm.Counter.Denied())
	}
}

// Stop stops the manager and waits for it. It may be called more than
// once.
func (rm *Running) Stop() {
	rm.cancel()
	<-rm.done
}

// Err returns, once the manager has stopped, the error it stopped with
// other than its cancellation.
func (rm *Running) Err() error {
	<-rm.done
	if rm.err != nil && !errors.Is(rm.err, context.Canceled) {
		return fmt.Errorf("manager stopped with an error: %w", rm.err)
	}
	return nil
}
