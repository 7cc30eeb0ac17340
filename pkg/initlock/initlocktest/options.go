package initlocktest

import (
	"github.com/initlock/initlock/pkg/initlock"
	"github.com/initlock/initlock/pkg/initlock/internal/engine"
)

// WithTokens makes a Locker draw the token of each grant and lock record it
// writes from next instead of at random, so that a test can predict, or
// replay, every value written. next must never return the same value twice
// to Lockers that share an API server: two grants with one token are one
// grant to the lock's rules.
func WithTokens(next func() string) initlock.Option {
	return func(e *engine.Env) { e.Tokens = next }
}
