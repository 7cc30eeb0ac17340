package chaos

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"sync"
	"time"
)

// LateWrite is a write an Injector held, answered with an error, and sent
// to the server afterwards.
type LateWrite struct {
	// Actor is the Injector's name.
	Actor string
	// Method and Path of the request.
	Method, Path string
	// Delay is how long the write was held after its caller got the error.
	Delay time.Duration
	// Code is the status the server answered the late write with; 0 when
	// it could not be sent.
	Code int
	// Err is why the late write could not be sent.
	Err error
}

// OnLateWrite sets a function called once each held write has been sent.
func (in *Injector) OnLateWrite(f func(LateWrite)) {
	in.mu.Lock()
	defer in.mu.Unlock()
	in.onLate = f
}

// WaitLate waits until every write held so far has been sent.
func (in *Injector) WaitLate() {
	in.mu.Lock()
	defer in.mu.Unlock()
	for in.pending > 0 {
		in.idle.Wait()
	}
}

// hold takes req's body and sends req to the server after delay, in the
// background, whatever becomes of its caller. The copy keeps the values of
// req's context (the operation it was made for) but not its cancellation.
func (in *Injector) hold(req *http.Request, delay time.Duration) error {
	var body []byte
	if req.Body != nil {
		var err error
		body, err = io.ReadAll(req.Body)
		_ = req.Body.Close()
		if err != nil {
			return err
		}
	}
	out := req.Clone(context.WithoutCancel(req.Context()))
	out.Body = io.NopCloser(bytes.NewReader(body))
	out.ContentLength = int64(len(body))
	out.GetBody = func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(body)), nil }
	in.mu.Lock()
	in.pending++
	in.mu.Unlock()
	go func() {
		time.Sleep(delay)
		in.sendLate(out, body, delay)
	}()
	return nil
}

// sendLate sends a held write, reports it, and throws the answer away.
func (in *Injector) sendLate(req *http.Request, body []byte, delay time.Duration) {
	lw := LateWrite{Actor: in.name, Method: req.Method, Path: req.URL.Path, Delay: delay}
	resp, err := in.next.RoundTrip(req)
	if err != nil {
		lw.Err = err
	} else {
		if req.Method == http.MethodDelete && isConfigMapPath(req.URL.Path) {
			resp = in.reportDelete(req, body, resp, true)
		}
		lw.Code = resp.StatusCode
		_, _ = io.Copy(io.Discard, resp.Body)
		_ = resp.Body.Close()
	}
	in.mu.Lock()
	if lw.Code >= 200 && lw.Code < 300 {
		in.stats.LateApplied++
	} else {
		in.stats.LateRejected++
	}
	onLate := in.onLate
	in.mu.Unlock()
	if onLate != nil {
		onLate(lw)
	}
	in.mu.Lock()
	defer in.mu.Unlock()
	if in.pending--; in.pending == 0 {
		in.idle.Broadcast()
	}
}

// watch opens a watch, its events delayed by the current WatchLag.
func (in *Injector) watch(req *http.Request) (*http.Response, error) {
	in.mu.Lock()
	lag := in.faults.WatchLag
	if lag > 0 {
		in.stats.LaggedWatches++
	}
	in.mu.Unlock()
	resp, err := in.next.RoundTrip(req)
	if err != nil || lag <= 0 {
		return resp, err
	}
	resp.Body = newLagBody(resp.Body, lag)
	return resp, nil
}

// lagBody hands out what it reads from src no sooner than lag after it was
// read, in order: the stream of a watch, delayed.
type lagBody struct {
	src    io.ReadCloser
	lag    time.Duration
	chunks chan chunk
	once   sync.Once
	closed chan struct{}
	rest   []byte
	err    error
}

type chunk struct {
	at   time.Time
	data []byte
	err  error
}

func newLagBody(src io.ReadCloser, lag time.Duration) *lagBody {
	b := &lagBody{src: src, lag: lag, chunks: make(chan chunk, 1024), closed: make(chan struct{})}
	go b.pump()
	return b
}

// pump reads src until it fails or the body is closed.
func (b *lagBody) pump() {
	for {
		buf := make([]byte, 32<<10)
		n, err := b.src.Read(buf)
		if n > 0 {
			select {
			case b.chunks <- chunk{at: time.Now(), data: buf[:n]}:
			case <-b.closed:
				return
			}
		}
		if err != nil {
			select {
			case b.chunks <- chunk{at: time.Now(), err: err}:
			case <-b.closed:
			}
			return
		}
	}
}

// Read implements io.Reader.
func (b *lagBody) Read(p []byte) (int, error) {
	if len(b.rest) == 0 {
		if b.err != nil {
			return 0, b.err
		}
		var c chunk
		select {
		case c = <-b.chunks:
		case <-b.closed:
			return 0, io.ErrClosedPipe
		}
		t := time.NewTimer(time.Until(c.at.Add(b.lag)))
		select {
		case <-t.C:
		case <-b.closed:
			t.Stop()
			return 0, io.ErrClosedPipe
		}
		if c.err != nil {
			b.err = c.err
			return 0, c.err
		}
		b.rest = c.data
	}
	n := copy(p, b.rest)
	b.rest = b.rest[n:]
	return n, nil
}

// Close implements io.Closer.
func (b *lagBody) Close() error {
	var err error
	b.once.Do(func() {
		close(b.closed)
		err = b.src.Close()
	})
	return err
}
