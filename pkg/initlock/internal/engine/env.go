package engine

import (
	"k8s.io/utils/clock"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/initlock/initlock/pkg/initlock/internal/report"
)

// maxAttempts bounds the read-decide-write rounds of one call.
const maxAttempts = 8

// Env is what Lock and Unlock work with: the clients, the clock and the
// token source. The package initlock's Locker is an Env set up by its
// options; package keeper builds one with NewEnv for an operator's release.
type Env struct {
	// Client writes; Reader reads live (never a possibly stale cache).
	Client client.Client
	Reader client.Reader
	// Clock stamps records.
	Clock clock.PassiveClock
	// Recorder, when set, receives events on the Cluster.
	Recorder report.EventRecorder
	// Tokens makes each value written into a grant register and a lock
	// record unique: it must never return the same value twice, across
	// every Env of every process.
	Tokens func() string
}

// NewEnv returns an Env that writes and reads through c, with the real
// clock, 128-bit random tokens and no event recorder.
func NewEnv(c client.Client) *Env {
	return &Env{Client: c, Reader: c, Clock: clock.RealClock{}, Tokens: newToken}
}
