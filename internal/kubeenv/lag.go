package kubeenv

import (
	"io"
	"net/http"
	"sync"
	"time"

	"k8s.io/client-go/rest"
)

// LagWatches returns a copy of cfg whose watches that match delay every
// event by lag: an informer cache fed by them lags that far behind the
// API server, as a cache does under load. Other requests are not delayed.
func LagWatches(cfg *rest.Config, lag time.Duration, match func(*http.Request) bool) *rest.Config {
	out := rest.CopyConfig(cfg)
	out.Wrap(func(rt http.RoundTripper) http.RoundTripper {
		return RoundTripperFunc(func(req *http.Request) (*http.Response, error) {
			resp, err := rt.RoundTrip(req)
			if err != nil || req.URL.Query().Get("watch") != "true" || !match(req) {
				return resp, err
			}
			resp.Body = LagBody(resp.Body, lag)
			return resp, nil
		})
	})
	return out
}

// LagBody returns a body that hands out what it reads from src no sooner
// than lag after it was read, in order: the stream of a watch, delayed.
func LagBody(src io.ReadCloser, lag time.Duration) io.ReadCloser {
	b := &lagBody{src: src, lag: lag, chunks: make(chan chunk, 1024), closed: make(chan struct{})}
	go b.pump()
	return b
}

// lagBody is LagBody's body.
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
