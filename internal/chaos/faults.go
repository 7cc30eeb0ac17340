package chaos

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/rest"
)

// Faults are the probabilities, each between 0 and 1, of the faults an
// Injector injects into one request. Watches are never faulted, only
// delayed (WatchLag).
type Faults struct {
	// Conflict answers a write with 409 Conflict without sending it.
	Conflict float64
	// ServerError answers with 500, 503 or 504 without sending the request.
	ServerError float64
	// Timeout fails the request with a network timeout without sending it.
	Timeout float64
	// LostResponse sends the request, then throws the server's answer away
	// and returns a 5xx or a timeout: the caller cannot tell whether its
	// write happened.
	LostResponse float64
	// LateWrite holds a write, answers the caller at once with a 5xx or a
	// timeout, and sends the write to the server up to MaxLateDelay later:
	// the caller gave up on a write the server applies afterwards.
	LateWrite    float64
	MaxLateDelay time.Duration
	// MaxLatency delays each request by up to this much.
	MaxLatency time.Duration
	// WatchLag delays every event of the watches opened from now on by this
	// much, so that an informer cache fed by them lags behind the server.
	WatchLag time.Duration
}

// Off tells whether no fault is injected.
func (f Faults) Off() bool {
	return f.Conflict == 0 && f.ServerError == 0 && f.Timeout == 0 && f.LostResponse == 0 && f.LateWrite == 0 &&
		f.MaxLatency == 0 && f.WatchLag == 0
}

func (f Faults) String() string {
	if f.Off() {
		return "none"
	}
	return fmt.Sprintf("conflict=%.2f 5xx=%.2f timeout=%.2f lost=%.2f late=%.2f(<=%s) latency<=%s watch-lag=%s",
		f.Conflict, f.ServerError, f.Timeout, f.LostResponse, f.LateWrite, f.MaxLateDelay, f.MaxLatency, f.WatchLag)
}

// FaultStats counts what an Injector did.
type FaultStats struct {
	Requests, Conflicts, ServerErrors, Timeouts, LostResponses int
	// LateWrites were held and answered with an error; LateApplied of them
	// the server then accepted (a 2xx), LateRejected it refused.
	LateWrites, LateApplied, LateRejected int
	// LaggedWatches were opened with their events delayed.
	LaggedWatches int
}

// Injected is the number of faults injected into requests.
func (s FaultStats) Injected() int {
	return s.Conflicts + s.ServerErrors + s.Timeouts + s.LostResponses + s.LateWrites
}

// Add sums two FaultStats.
func (s FaultStats) Add(o FaultStats) FaultStats {
	return FaultStats{s.Requests + o.Requests, s.Conflicts + o.Conflicts, s.ServerErrors + o.ServerErrors,
		s.Timeouts + o.Timeouts, s.LostResponses + o.LostResponses,
		s.LateWrites + o.LateWrites, s.LateApplied + o.LateApplied, s.LateRejected + o.LateRejected,
		s.LaggedWatches + o.LaggedWatches}
}

// Deletion is a DELETE of a ConfigMap that reached the API server, as an
// Injector saw it.
type Deletion struct {
	// Actor is the Injector's name.
	Actor string
	// Op is the operation the caller named in its context (WithOp), if any.
	Op string
	// Caller is the Machine the operation was made for (WithCaller), if
	// any.
	Caller string
	// Namespace and Name of the ConfigMap.
	Namespace, Name string
	// UID is the UID precondition of the request, or else the UID of the
	// object the server answered with.
	UID types.UID
	// Code is the status code the server answered with, before any fault.
	Code int
	// Lost tells that the caller did not get the server's answer.
	Lost bool
}

// Injector is an http.RoundTripper that injects Faults into the requests
// of one actor, and reports every ConfigMap DELETE that reached the server.
// It is safe for concurrent use.
type Injector struct {
	name string
	next http.RoundTripper

	mu       sync.Mutex
	faults   Faults
	rnd      *rand.Rand
	stats    FaultStats
	onDelete func(Deletion)
	onLate   func(LateWrite)
	// pending counts the held writes not yet sent; idle is signalled when
	// it drops to zero.
	pending int
	idle    *sync.Cond
}

var _ http.RoundTripper = (*Injector)(nil)

// NewInjector returns an Injector named name that sends requests through
// next, with its random choices drawn from seed. onDelete, when not nil, is
// called for every ConfigMap DELETE that reached the server.
func NewInjector(name string, next http.RoundTripper, seed uint64, onDelete func(Deletion)) *Injector {
	in := &Injector{name: name, next: next, rnd: rand.New(rand.NewPCG(seed, 0x5eed)), onDelete: onDelete}
	in.idle = sync.NewCond(&in.mu)
	return in
}

// WrapConfig returns a copy of cfg whose requests go through an Injector,
// and that Injector.
func WrapConfig(cfg *rest.Config, name string, seed uint64, onDelete func(Deletion)) (*rest.Config, *Injector) {
	out := rest.CopyConfig(cfg)
	inj := NewInjector(name, nil, seed, onDelete)
	out.Wrap(func(rt http.RoundTripper) http.RoundTripper {
		inj.next = rt
		return inj
	})
	return out, inj
}

// SetFaults changes the faults injected from now on.
func (in *Injector) SetFaults(f Faults) {
	in.mu.Lock()
	defer in.mu.Unlock()
	in.faults = f
}

// Stats returns what the Injector did so far.
func (in *Injector) Stats() FaultStats {
	in.mu.Lock()
	defer in.mu.Unlock()
	return in.stats
}

type opKey struct{}

// WithOp names the operation a request is made for, as reported in a
// Deletion.
func WithOp(ctx context.Context, op string) context.Context {
	return context.WithValue(ctx, opKey{}, op)
}

type callerKey struct{}

// WithCaller names the Machine a request is made for, as reported in a
// Deletion.
func WithCaller(ctx context.Context, machine string) context.Context {
	return context.WithValue(ctx, callerKey{}, machine)
}

// OpOf returns the operation named in ctx by WithOp.
func OpOf(ctx context.Context) (string, bool) {
	op, ok := ctx.Value(opKey{}).(string)
	return op, ok
}

type fault int

const (
	faultNone fault = iota
	faultConflict
	faultServerError
	faultTimeout
	faultLost
	faultLate
)

// draw is the fate of one request.
type draw struct {
	fault fault
	// latency is added before anything else; late is how long a held
	// write waits before it is sent.
	latency, late time.Duration
	// code is the status answered, 0 for a timeout.
	code int
}

// decide draws the fate of one request.
func (in *Injector) decide(req *http.Request) draw {
	in.mu.Lock()
	defer in.mu.Unlock()
	in.stats.Requests++
	f := in.faults
	var d draw
	if f.MaxLatency > 0 {
		d.latency = time.Duration(in.rnd.Int64N(int64(f.MaxLatency)))
	}
	d.code = []int{http.StatusInternalServerError, http.StatusServiceUnavailable, http.StatusGatewayTimeout}[in.rnd.IntN(3)]
	x := in.rnd.Float64()
	write := req.Method != http.MethodGet && req.Method != http.MethodHead
	var p float64
	if write {
		if p += f.Conflict; x < p {
			in.stats.Conflicts++
			d.fault, d.code = faultConflict, http.StatusConflict
			return d
		}
	}
	if p += f.ServerError; x < p {
		in.stats.ServerErrors++
		d.fault = faultServerError
		return d
	}
	if p += f.Timeout; x < p {
		in.stats.Timeouts++
		d.fault, d.code = faultTimeout, 0
		return d
	}
	if p += f.LostResponse; x < p {
		in.stats.LostResponses++
		d.fault = faultLost
		if in.rnd.IntN(2) == 0 {
			d.code = 0 // a timeout
		}
		return d
	}
	if write {
		if p += f.LateWrite; x < p {
			in.stats.LateWrites++
			d.fault = faultLate
			if in.rnd.IntN(2) == 0 {
				d.code = 0
			}
			d.late = time.Duration(in.rnd.Int64N(int64(f.MaxLateDelay) + 1))
			return d
		}
	}
	d.code = 0
	return d
}

// RoundTrip implements http.RoundTripper.
func (in *Injector) RoundTrip(req *http.Request) (*http.Response, error) {
	if req.URL.Query().Get("watch") == "true" {
		return in.watch(req)
	}
	d := in.decide(req)
	if d.latency > 0 {
		select {
		case <-time.After(d.latency):
		case <-req.Context().Done():
			return nil, req.Context().Err()
		}
	}
	switch d.fault {
	case faultConflict, faultServerError:
		drain(req)
		return statusResponse(req, d.code), nil
	case faultTimeout:
		drain(req)
		return nil, timeoutError(req)
	case faultLate:
		if err := in.hold(req, d.late); err != nil {
			return nil, err
		}
		if d.code == 0 {
			return nil, timeoutError(req)
		}
		return statusResponse(req, d.code), nil
	}
	var deleteBody []byte
	isCMDelete := req.Method == http.MethodDelete && isConfigMapPath(req.URL.Path)
	if isCMDelete && req.Body != nil {
		deleteBody, _ = io.ReadAll(req.Body)
		_ = req.Body.Close()
		req.Body = io.NopCloser(bytes.NewReader(deleteBody))
	}
	resp, err := in.next.RoundTrip(req)
	if isCMDelete && err == nil {
		resp = in.reportDelete(req, deleteBody, resp, d.fault == faultLost)
	}
	if d.fault != faultLost {
		return resp, err
	}
	if err == nil {
		_, _ = io.Copy(io.Discard, resp.Body)
		_ = resp.Body.Close()
	}
	if d.code == 0 {
		return nil, timeoutError(req)
	}
	return statusResponse(req, d.code), nil
}

// reportDelete tells onDelete about a ConfigMap DELETE the server answered,
// and returns the response with its body intact.
func (in *Injector) reportDelete(req *http.Request, body []byte, resp *http.Response, lost bool) *http.Response {
	if in.onDelete == nil {
		return resp
	}
	respBody, _ := io.ReadAll(resp.Body)
	_ = resp.Body.Close()
	resp.Body = io.NopCloser(bytes.NewReader(respBody))
	ns, name := configMapKey(req.URL.Path)
	d := Deletion{Actor: in.name, Namespace: ns, Name: name, Code: resp.StatusCode, Lost: lost}
	if op, ok := OpOf(req.Context()); ok {
		d.Op = op
	}
	if m, ok := req.Context().Value(callerKey{}).(string); ok {
		d.Caller = m
	}
	d.UID = preconditionUID(body)
	if d.UID == "" && resp.StatusCode < 300 {
		d.UID = objectUID(respBody)
	}
	in.onDelete(d)
	return resp
}
