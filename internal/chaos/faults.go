package chaos

import (
	"context"
	"fmt"
	"math/rand/v2"
	"net/http"
	"strings"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/rest"

	"github.com/initlock/initlock/internal/kubeenv/faults"
)

// Faults are the probabilities, each between 0 and 1, of the faults an
// Injector injects into one request, each of a class of the catalogue
// (internal/kubeenv/faults, listed in requestFaults). Watches are never
// faulted, only delayed (WatchLag).
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
	// RelinkWatchLag, when set, delays instead the events of the relinker's
	// watches (a User-Agent with relink.UserAgent) by this much: the
	// relinker's cache lags on its own.
	RelinkWatchLag time.Duration
}

// requestFault is a fault class an Injector draws for a request: its
// probability in Faults, and whether only writes meet it.
type requestFault struct {
	class  faults.Class
	field  string
	writes bool
	prob   func(Faults) float64
}

// requestFaults are the faults an Injector draws, in the order drawn; at
// most one a request.
var requestFaults = []requestFault{
	{faults.Conflict, "Conflict", true, func(f Faults) float64 { return f.Conflict }},
	{faults.ServerError, "ServerError", false, func(f Faults) float64 { return f.ServerError }},
	{faults.Timeout, "Timeout", false, func(f Faults) float64 { return f.Timeout }},
	{faults.LostResponse, "LostResponse", false, func(f Faults) float64 { return f.LostResponse }},
	{faults.LateWrite, "LateWrite", true, func(f Faults) float64 { return f.LateWrite }},
}

// Off tells whether no fault is injected.
func (f Faults) Off() bool {
	for _, rf := range requestFaults {
		if rf.prob(f) != 0 {
			return false
		}
	}
	return f.MaxLatency == 0 && f.WatchLag == 0 && f.RelinkWatchLag == 0
}

func (f Faults) String() string {
	if f.Off() {
		return "none"
	}
	var parts []string
	for _, rf := range requestFaults {
		p := fmt.Sprintf("%s=%.2f", rf.class, rf.prob(f))
		if rf.class == faults.LateWrite {
			p += fmt.Sprintf("(<=%s)", f.MaxLateDelay)
		}
		parts = append(parts, p)
	}
	parts = append(parts, fmt.Sprintf("%s<=%s", faults.Latency, f.MaxLatency), fmt.Sprintf("watch-lag=%s", f.WatchLag),
		fmt.Sprintf("relink-watch-lag=%s", f.RelinkWatchLag))
	return strings.Join(parts, " ")
}

// FaultStats counts what an Injector did.
type FaultStats struct {
	Requests int
	// ByClass counts the requests each fault class of requestFaults met,
	// and those delayed (faults.Latency). Of the late writes, held and
	// answered with an error, LateApplied the server then accepted (a
	// 2xx), LateRejected it refused.
	ByClass                   faults.Tally
	LateApplied, LateRejected int
	// LaggedWatches were opened with their events delayed; of them,
	// LaggedRelinkWatches were the relinker's, by RelinkWatchLag.
	LaggedWatches, LaggedRelinkWatches int
}

// Injected is the number of faults injected into requests (not counting
// latency).
func (s FaultStats) Injected() int {
	n := 0
	for _, rf := range requestFaults {
		n += s.ByClass[rf.class]
	}
	return n
}

// Add sums two FaultStats.
func (s FaultStats) Add(o FaultStats) FaultStats {
	sum := sumInts(s, o)
	sum.ByClass = s.ByClass.Add(o.ByClass)
	return sum
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
	// Name of the ConfigMap.
	Name string
	// UID is the UID precondition of the request, or else the UID of the
	// object the server answered with.
	UID types.UID
	// Code is the status code the server answered with, before any fault.
	Code int
	// Lost tells that the caller did not get the server's answer.
	Lost bool

	// reads are when the actor last sent a read of each Machine ("" for a
	// list) before the delete's answer (Checker.MachineRead).
	reads map[string]time.Duration
}

// lastRead is when the deleter last read machine, by name or in a list;
// 0 when it never did.
func (d Deletion) lastRead(machine string) time.Duration {
	return max(d.reads[machine], d.reads[""])
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
	onRead   func(actor, machine string)
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
	in := &Injector{name: name, next: next, rnd: rand.New(rand.NewPCG(seed, 0x5eed)), onDelete: onDelete,
		stats: FaultStats{ByClass: faults.Tally{}}}
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
	s := in.stats
	s.ByClass = s.ByClass.Add(nil)
	return s
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

// draw is the fate of one request.
type draw struct {
	// fault is the class of requestFaults drawn, "" for none.
	fault faults.Class
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
		if d.latency > 0 {
			in.stats.ByClass[faults.Latency]++
		}
	}
	d.code = []int{http.StatusInternalServerError, http.StatusServiceUnavailable, http.StatusGatewayTimeout}[in.rnd.IntN(3)]
	x := in.rnd.Float64()
	write := req.Method != http.MethodGet && req.Method != http.MethodHead
	var p float64
	for _, rf := range requestFaults {
		if rf.writes && !write {
			continue
		}
		if p += rf.prob(f); x < p {
			d.fault = rf.class
			break
		}
	}
	switch d.fault {
	case "":
		d.code = 0
		return d
	case faults.Conflict:
		d.code = http.StatusConflict
	case faults.Timeout:
		d.code = 0
	case faults.LostResponse:
		if in.rnd.IntN(2) == 0 {
			d.code = 0 // a timeout
		}
	case faults.LateWrite:
		if in.rnd.IntN(2) == 0 {
			d.code = 0
		}
		d.late = time.Duration(in.rnd.Int64N(int64(f.MaxLateDelay) + 1))
	}
	in.stats.ByClass[d.fault]++
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
	case faults.Conflict, faults.ServerError, faults.Timeout:
		_, _, _ = readBody(req.Body) // never sent
		return answer(req, d.code)
	case faults.LateWrite:
		if err := in.hold(req, d.late); err != nil {
			return nil, err
		}
		return answer(req, d.code)
	}
	var deleteBody []byte
	_, isCMDelete := configMapDelete(req)
	if isCMDelete {
		deleteBody, req.Body, _ = readBody(req.Body)
	}
	in.reportRead(req)
	resp, err := in.next.RoundTrip(req)
	if isCMDelete && err == nil {
		resp = in.reportDelete(req, deleteBody, resp, d.fault == faults.LostResponse)
	}
	if d.fault != faults.LostResponse {
		return resp, err
	}
	if err == nil {
		_, _, _ = readBody(resp.Body)
	}
	return answer(req, d.code)
}

// OnMachineRead sets f to be told of every read of Machines the actor
// sends to the server: the Machine's name, or "" for a list.
func (in *Injector) OnMachineRead(f func(actor, machine string)) {
	in.mu.Lock()
	defer in.mu.Unlock()
	in.onRead = f
}

// reportRead tells onRead about a GET of a Machine or a list of Machines.
func (in *Injector) reportRead(req *http.Request) {
	in.mu.Lock()
	f := in.onRead
	in.mu.Unlock()
	if name, ok := machineRead(req); ok && f != nil {
		f(in.name, name)
	}
}

// reportDelete tells onDelete about a ConfigMap DELETE the server answered,
// and returns the response with its body intact.
func (in *Injector) reportDelete(req *http.Request, body []byte, resp *http.Response, lost bool) *http.Response {
	if in.onDelete == nil {
		return resp
	}
	respBody, body2, _ := readBody(resp.Body)
	resp.Body = body2
	key, _ := configMapDelete(req)
	d := Deletion{Actor: in.name, Name: key.Name, Code: resp.StatusCode, Lost: lost}
	if op, ok := OpOf(req.Context()); ok {
		d.Op = op
	}
	if m, ok := req.Context().Value(callerKey{}).(string); ok {
		d.Caller = m
	}
	d.UID = uidIn(body)
	if d.UID == "" && resp.StatusCode < 300 {
		d.UID = uidIn(respBody)
	}
	in.onDelete(d)
	return resp
}
