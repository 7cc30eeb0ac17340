package contention

import (
	"context"
	"fmt"
	"math"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// answer is what one Lock call told its caller.
type answer struct {
	// acquired: the caller holds the lock.
	acquired bool
	// held: the caller was refused because another Machine holds the lock,
	// its final answer until that Machine finishes.
	held bool
	// holder names the Machine that holds the lock, when the lock says.
	holder string
}

// outcome is one caller's way to its final answer.
type outcome struct {
	took     time.Duration
	attempts int
	answer   answer
	// errors are the calls that failed, and refusals that did not tell
	// that another Machine holds the lock.
	errors int
	err    error
}

// maxWait bounds a caller's way to its final answer.
const maxWait = 2 * time.Minute

// retryDelay is how long a caller waits before its nth retry: the
// per-object exponential back-off a controller-runtime reconciler gets when
// it returns an error or asks to be requeued (5 ms, doubled each time).
func retryDelay(n int) time.Duration { return min(5*time.Millisecond<<(n-1), time.Second) }

// race has n callers call lock at the same moment and each retry, as a
// reconciler does, until it acquires the lock or is told another Machine
// holds it. It returns their outcomes, the times counted from the common
// start.
func race(ctx context.Context, n int, lock func(ctx context.Context, caller, attempt int) (answer, error)) []outcome {
	out := make([]outcome, n)
	start := make(chan struct{})
	var ready, wg sync.WaitGroup
	var t0 time.Time
	ready.Add(n)
	for i := range n {
		wg.Go(func() {
			o := &out[i]
			ready.Done()
			<-start
			deadline := t0.Add(maxWait)
			for {
				o.attempts++
				a, err := lock(ctx, i, o.attempts)
				switch {
				case err == nil && (a.acquired || a.held):
					o.answer, o.took = a, time.Since(t0)
					return
				case err != nil:
					o.err = err
				}
				o.errors++
				if time.Now().After(deadline) || ctx.Err() != nil {
					o.took = time.Since(t0)
					o.err = fmt.Errorf("no final answer within %s after %d attempts (last error: %w)", maxWait, o.attempts, o.err)
					return
				}
				time.Sleep(retryDelay(o.attempts))
			}
		})
	}
	ready.Wait()
	t0 = time.Now()
	close(start)
	wg.Wait()
	return out
}

// winner returns the index of the one caller that acquired the lock, and
// fails b unless there is exactly one and every caller got a final answer.
func winner(b *testing.B, what string, out []outcome) int {
	b.Helper()
	w := -1
	for i, o := range out {
		if o.err != nil && !o.answer.acquired && !o.answer.held {
			b.Fatalf("%s: caller %d: %v", what, i, o.err)
		}
		if o.answer.acquired {
			if w >= 0 {
				b.Fatalf("%s: callers %d and %d both acquired the lock", what, w, i)
			}
			w = i
		}
	}
	if w < 0 {
		told := map[string]int{}
		for _, o := range out {
			told[o.answer.holder]++
		}
		b.Fatalf("%s: no caller acquired the lock; holders the callers were told (\"\" when not told): %v", what, told)
	}
	return w
}

// stats pools the outcomes of every round of one lock.
type stats struct {
	times   []time.Duration
	winners []time.Duration
	// requests (writes among them), attempts and errors summed over the
	// callers.
	requests, writes, attempts, errors int
}

func (s *stats) add(out []outcome, w, requests, writes int) {
	for _, o := range out {
		s.times = append(s.times, o.took)
		s.attempts += o.attempts
		s.errors += o.errors
	}
	s.winners = append(s.winners, out[w].took)
	s.requests += requests
	s.writes += writes
}

// percentile is the nearest-rank percentile p (0 to 1) of the pooled
// times, in milliseconds.
func (s *stats) percentile(p float64) float64 {
	t := slices.Clone(s.times)
	slices.Sort(t)
	i := max(int(math.Ceil(p*float64(len(t))))-1, 0)
	return ms(t[i])
}

func (s *stats) meanWinner() float64 {
	var sum time.Duration
	for _, w := range s.winners {
		sum += w
	}
	return ms(sum) / float64(len(s.winners))
}

func (s *stats) perCaller(v int) float64 { return float64(v) / float64(len(s.times)) }

func ms(d time.Duration) float64 { return float64(d.Nanoseconds()) / 1e6 }

// callerClient is one caller's view of the shared client: it counts the
// requests the caller makes, and remembers whether one failed otherwise
// than a lock's read or create can fail in a race (not found, already
// exists) and whether the caller deleted anything.
type callerClient struct {
	client.Client
	requests   atomic.Int64
	unexpected atomic.Bool
	deleted    atomic.Bool
}

func (c *callerClient) note(err error) error {
	c.requests.Add(1)
	if err != nil && !apierrors.IsNotFound(err) && !apierrors.IsAlreadyExists(err) {
		c.unexpected.Store(true)
	}
	return err
}

// reset forgets what the last call saw, but not the requests.
func (c *callerClient) reset() {
	c.unexpected.Store(false)
	c.deleted.Store(false)
}

func (c *callerClient) Get(ctx context.Context, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
	return c.note(c.Client.Get(ctx, key, obj, opts...))
}

func (c *callerClient) List(ctx context.Context, list client.ObjectList, opts ...client.ListOption) error {
	return c.note(c.Client.List(ctx, list, opts...))
}

func (c *callerClient) Create(ctx context.Context, obj client.Object, opts ...client.CreateOption) error {
	return c.note(c.Client.Create(ctx, obj, opts...))
}

func (c *callerClient) Update(ctx context.Context, obj client.Object, opts ...client.UpdateOption) error {
	return c.note(c.Client.Update(ctx, obj, opts...))
}

func (c *callerClient) Patch(ctx context.Context, obj client.Object, patch client.Patch, opts ...client.PatchOption) error {
	return c.note(c.Client.Patch(ctx, obj, patch, opts...))
}

func (c *callerClient) Delete(ctx context.Context, obj client.Object, opts ...client.DeleteOption) error {
	c.deleted.Store(true)
	return c.note(c.Client.Delete(ctx, obj, opts...))
}
