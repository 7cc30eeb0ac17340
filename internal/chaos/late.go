package chaos

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"strings"
	"time"

	"github.com/initlock/initlock/internal/kubeenv"
	"github.com/initlock/initlock/internal/relink"
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
	body, _, err := readBody(req.Body)
	if err != nil {
		return err
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
		if _, ok := configMapDelete(req); ok {
			resp = in.reportDelete(req, body, resp, true)
		}
		lw.Code = resp.StatusCode
		_, _, _ = readBody(resp.Body)
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
	if in.faults.RelinkWatchLag > 0 && strings.Contains(req.UserAgent(), relink.UserAgent) {
		lag = in.faults.RelinkWatchLag
		in.stats.LaggedRelinkWatches++
	}
	if lag > 0 {
		in.stats.LaggedWatches++
	}
	in.mu.Unlock()
	resp, err := in.next.RoundTrip(req)
	if err != nil || lag <= 0 {
		return resp, err
	}
	resp.Body = kubeenv.LagBody(resp.Body, lag)
	return resp, nil
}
