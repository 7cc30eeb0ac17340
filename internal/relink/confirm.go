package relink

import (
	"context"
	"sync"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/clock"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// liveReadTimeout bounds one live read of an owner.
const liveReadTimeout = 30 * time.Second

// ConfirmFor is how long an owner's live read may confirm its UID: for
// the objects that were first seen before the read was sent, and before
// the patch that writes it, which goes out only while the read of every
// owner it writes was answered less than ConfirmFor before. It is
// measured on Options.Clock, as are the times reads are sent and answered.
const ConfirmFor = time.Second

// liveReads reads owners from the API server, never from a cache, batched
// per owner. get(id, seen) answers with a read of the owner sent after
// seen, the moment the relinker first saw the object asking, and answered
// less than ConfirmFor ago, or in flight; when there is none, the caller
// waits for the next read. At most one read of an owner is in flight, and
// every caller that cannot use it shares the next one. getAll reads
// several owners so, all at once.
//
// So a UID the relinker writes was live after the object was created:
// an owner deleted before the object existed (a lagging cache's view of an
// earlier restore) is never written. Each read tells when it was answered,
// so that the relinker patches only on reads answered less than
// ConfirmFor before the patch (confirm). Objects waiting for an owner that
// a restore brings back (50,000 ConfigMaps of a Cluster) share one read
// per ConfirmFor.
type liveReads struct {
	reader client.Reader
	clock  clock.WithDelayedExecution

	mu      sync.Mutex
	byOwner map[ownerID]*readRound
}

// ownerID names an owner object: its kind, in the version read, and key.
type ownerID struct {
	gvk schema.GroupVersionKind
	key types.NamespacedName
}

// readRound is the reads of one owner: last is the latest read answered
// without error, inflight the read sent and not yet answered, next gathers
// the callers for the read not yet sent, and sending tells that a
// goroutine sends the reads.
type readRound struct {
	last, inflight, next *liveRead
	sending              bool
}

// liveRead is one read: when it was sent and answered, and the owner's
// metadata, nil when it does not exist.
type liveRead struct {
	sent, answered time.Time
	done           chan struct{}
	owner          client.Object
	err            error
}

func newLiveReads(r client.Reader, c clock.WithDelayedExecution) *liveReads {
	return &liveReads{reader: r, clock: c, byOwner: map[ownerID]*readRound{}}
}

// liveOwner is the answer to a live read of an owner: its metadata (a nil
// interface when it does not exist) and when the read was answered.
type liveOwner struct {
	owner    client.Object
	answered time.Time
	err      error
}

// getAll reads the owners ids together, each as get does: the reads that
// are not shared with other callers are all sent before any is answered.
func (l *liveReads) getAll(ctx context.Context, ids []ownerID, seen time.Time) []liveOwner {
	out := make([]liveOwner, len(ids))
	var wg sync.WaitGroup
	for j, id := range ids {
		wg.Go(func() { out[j] = l.get(ctx, id, seen) })
	}
	wg.Wait()
	return out
}

// get returns the owner's metadata (a nil interface when it does not
// exist), as read by a request sent after seen and answered less than
// ConfirmFor ago, or in flight, and when that request was answered.
func (l *liveReads) get(ctx context.Context, id ownerID, seen time.Time) liveOwner {
	l.mu.Lock()
	round := l.byOwner[id]
	if round == nil {
		round = &readRound{}
		l.byOwner[id] = round
	}
	if last := round.last; last != nil && !last.sent.Before(seen) && l.clock.Since(last.answered) < ConfirmFor {
		l.mu.Unlock()
		return liveOwner{owner: last.owner, answered: last.answered}
	}
	read := round.inflight
	if read == nil || read.sent.Before(seen) {
		if round.next == nil {
			round.next = &liveRead{done: make(chan struct{})}
		}
		read = round.next
	}
	if !round.sending {
		round.sending = true
		go l.send(context.WithoutCancel(ctx), id, round)
	}
	l.mu.Unlock()
	select {
	case <-read.done:
		return liveOwner{owner: read.owner, answered: read.answered, err: read.err}
	case <-ctx.Done():
		return liveOwner{err: ctx.Err()}
	}
}

// send sends the reads of one owner, one at a time, until no caller
// waits; the owner is forgotten once its last read is older than
// ConfirmFor and nobody waits.
func (l *liveReads) send(ctx context.Context, id ownerID, round *readRound) {
	for {
		l.mu.Lock()
		read := round.next
		round.next = nil
		if read == nil {
			round.sending = false
			l.mu.Unlock()
			// forget runs apart: a fake clock calls the function
			// holding its own lock, which forget's reading of the
			// clock takes again, as get does holding l.mu.
			l.clock.AfterFunc(ConfirmFor, func() { go l.forget(id, round) })
			return
		}
		read.sent = l.clock.Now()
		round.inflight = read
		l.mu.Unlock()
		read.owner, read.err = l.read(ctx, id)
		l.mu.Lock()
		read.answered = l.clock.Now()
		round.inflight = nil
		if read.err == nil {
			round.last = read
		}
		l.mu.Unlock()
		close(read.done)
	}
}

// forget drops round once it is idle and its last read too old to serve.
func (l *liveReads) forget(id ownerID, round *readRound) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.byOwner[id] == round && !round.sending && (round.last == nil || l.clock.Since(round.last.answered) >= ConfirmFor) {
		delete(l.byOwner, id)
	}
}

func (l *liveReads) read(ctx context.Context, id ownerID) (client.Object, error) {
	ctx, cancel := context.WithTimeout(ctx, liveReadTimeout)
	defer cancel()
	owner := &metav1.PartialObjectMetadata{}
	owner.SetGroupVersionKind(id.gvk)
	err := l.reader.Get(ctx, id.key, owner)
	if apierrors.IsNotFound(err) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	return owner, nil
}
