package chaos_test

import (
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/initlock/initlock/internal/chaos"
	"github.com/initlock/initlock/internal/kubeenv"
	"github.com/initlock/initlock/internal/kubeenv/faults"
)

// sent is what a fake API server received.
type sent struct {
	method, path, body, op string
	ctxErr                 error
}

// fakeServer answers every request with code and records it.
func fakeServer(code int, answer string) (http.RoundTripper, func() []sent) {
	var mu sync.Mutex
	var got []sent
	rt := kubeenv.RoundTripperFunc(func(r *http.Request) (*http.Response, error) {
		var body []byte
		if r.Body != nil {
			body, _ = io.ReadAll(r.Body)
		}
		op, _ := chaos.OpOf(r.Context())
		mu.Lock()
		got = append(got, sent{method: r.Method, path: r.URL.Path, body: string(body), op: op, ctxErr: r.Context().Err()})
		mu.Unlock()
		rec := httptest.NewRecorder()
		rec.Header().Set("Content-Type", "application/json")
		rec.WriteHeader(code)
		_, _ = rec.WriteString(answer)
		return rec.Result(), nil
	})
	return rt, func() []sent {
		mu.Lock()
		defer mu.Unlock()
		return append([]sent(nil), got...)
	}
}

// TestLateWrite: a held write reaches its caller as an error first, and
// the server afterwards, with its body and operation, even though the
// caller has given up; reads are never held.
func TestLateWrite(t *testing.T) {
	next, got := fakeServer(http.StatusOK, `{}`)
	inj := chaos.NewInjector("bc-1", next, 1, nil)
	inj.SetFaults(chaos.Faults{LateWrite: 1, MaxLateDelay: 20 * time.Millisecond})
	var reported recorder[chaos.LateWrite]
	inj.OnLateWrite(reported.add)

	const path = "/apis/cluster.x-k8s.io/v1beta2/namespaces/ns/clusters/c1"
	ctx, cancel := context.WithCancel(chaos.WithOp(t.Context(), "lock"))
	req := httptest.NewRequestWithContext(ctx, http.MethodPatch, "https://api"+path, strings.NewReader(`[{"op":"test"}]`))
	resp, err := inj.RoundTrip(req)
	var netErr net.Error
	switch {
	case err != nil && errors.As(err, &netErr) && netErr.Timeout():
	case err == nil && resp.StatusCode >= 500:
		_ = resp.Body.Close()
	default:
		t.Fatalf("held write answered %v, %v; want a timeout or a 5xx", resp, err)
	}
	cancel() // the caller gives up

	read := httptest.NewRequestWithContext(t.Context(), http.MethodGet, "https://api"+path, nil)
	if resp, err := inj.RoundTrip(read); err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("read answered %v, %v; want it sent at once", resp, err)
	}
	inj.WaitLate()
	all := got()
	if len(all) != 2 {
		t.Fatalf("server received %+v, want the read and the late write", all)
	}
	late := all[1]
	if all[0].method != http.MethodGet || late.method != http.MethodPatch || late.path != path || late.body != `[{"op":"test"}]` || late.op != "lock" {
		t.Fatalf("server received %+v, want the read, then the patch with its body and operation", all)
	}
	if late.ctxErr != nil {
		t.Fatalf("the late write was sent with a cancelled context: %v", late.ctxErr)
	}
	s := inj.Stats()
	if s.ByClass[faults.LateWrite] != 1 || s.LateApplied != 1 || s.LateRejected != 0 || s.Injected() != 1 {
		t.Fatalf("stats %+v, want one late write, applied", s)
	}
	if lates := reported.all(); len(lates) != 1 || lates[0].Code != http.StatusOK || lates[0].Method != http.MethodPatch || lates[0].Actor != "bc-1" {
		t.Fatalf("late writes reported %+v, want the patch, answered 200", lates)
	}
}

// TestLateDelete: a ConfigMap delete applied late is reported as a
// deletion whose answer the caller did not get, and one the server refuses
// counts as rejected.
func TestLateDelete(t *testing.T) {
	next, _ := fakeServer(http.StatusOK, `{"kind":"ConfigMap","apiVersion":"v1","metadata":{"name":"c1-lock","uid":"u-1"}}`)
	var seen recorder[chaos.Deletion]
	inj := chaos.NewInjector("mgr-1", next, 2, seen.add)
	inj.SetFaults(chaos.Faults{LateWrite: 1})
	req := httptest.NewRequestWithContext(t.Context(), http.MethodDelete, "https://api/api/v1/namespaces/ns/configmaps/c1-lock",
		strings.NewReader(`{"kind":"DeleteOptions","apiVersion":"v1","preconditions":{"uid":"u-1"}}`))
	if resp, err := inj.RoundTrip(req); err == nil {
		_ = resp.Body.Close()
	}
	inj.WaitLate()
	d := seen.all()
	if len(d) != 1 || d[0].UID != "u-1" || !d[0].Lost || d[0].Actor != "mgr-1" || d[0].Name != "c1-lock" || d[0].Code != http.StatusOK {
		t.Fatalf("deletions %+v, want the late one of uid u-1, its answer lost", d)
	}

	refusing, _ := fakeServer(http.StatusUnprocessableEntity, `{}`)
	inj = chaos.NewInjector("bc-1", refusing, 3, nil)
	inj.SetFaults(chaos.Faults{LateWrite: 1})
	req = httptest.NewRequestWithContext(t.Context(), http.MethodPatch, "https://api/apis/x/v1/namespaces/ns/clusters/c1", strings.NewReader(`[]`))
	if resp, err := inj.RoundTrip(req); err == nil {
		_ = resp.Body.Close()
	}
	inj.WaitLate()
	if s := inj.Stats(); s.ByClass[faults.LateWrite] != 1 || s.LateApplied != 0 || s.LateRejected != 1 {
		t.Fatalf("stats %+v, want one late write, rejected", s)
	}
}

// TestWatchLag: a lagged watch delivers the whole stream in order, and
// closing it ends a read that waits.
func TestWatchLag(t *testing.T) {
	pr, pw := io.Pipe()
	next := kubeenv.RoundTripperFunc(func(r *http.Request) (*http.Response, error) {
		return &http.Response{StatusCode: http.StatusOK, Body: pr, Header: http.Header{}, Request: r}, nil
	})
	inj := chaos.NewInjector("mgr-1", next, 4, nil)
	inj.SetFaults(chaos.Faults{WatchLag: 10 * time.Millisecond})
	req := httptest.NewRequestWithContext(t.Context(), http.MethodGet, "https://api/api/v1/configmaps?watch=true", nil)
	resp, err := inj.RoundTrip(req)
	if err != nil {
		t.Fatal(err)
	}
	go func() {
		for _, s := range []string{"event-1\n", "event-2\n", "event-3\n"} {
			_, _ = pw.Write([]byte(s))
		}
		_ = pw.Close()
	}()
	b, err := io.ReadAll(resp.Body)
	if err != nil || string(b) != "event-1\nevent-2\nevent-3\n" {
		t.Fatalf("lagged watch read %q, %v; want the three events in order", b, err)
	}
	if s := inj.Stats(); s.LaggedWatches != 1 || s.Injected() != 0 {
		t.Fatalf("stats %+v, want one lagged watch and no request fault", s)
	}

	pr2, _ := io.Pipe()
	next2 := kubeenv.RoundTripperFunc(func(r *http.Request) (*http.Response, error) {
		return &http.Response{StatusCode: http.StatusOK, Body: pr2, Header: http.Header{}, Request: r}, nil
	})
	inj = chaos.NewInjector("mgr-2", next2, 5, nil)
	inj.SetFaults(chaos.Faults{WatchLag: time.Hour})
	resp, err = inj.RoundTrip(req)
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() {
		_, err := resp.Body.Read(make([]byte, 16))
		done <- err
	}()
	if err := resp.Body.Close(); err != nil {
		t.Fatal(err)
	}
	if err := <-done; err == nil {
		t.Fatal("a read of a closed lagged watch succeeded")
	}
}

// TestMachineReads: the Injector tells of every read of a Machine, by
// name, and of every list of Machines; other requests are not reads of
// Machines.
func TestMachineReads(t *testing.T) {
	next, _ := fakeServer(http.StatusOK, `{}`)
	inj := chaos.NewInjector("mgr-1", next, 1, nil)
	var reads []string
	inj.OnMachineRead(func(actor, machine string) { reads = append(reads, actor+":"+machine) })
	for _, r := range []struct{ method, path string }{
		{http.MethodGet, "/apis/cluster.x-k8s.io/v1beta2/namespaces/ns/machines/m1"},
		{http.MethodGet, "/apis/cluster.x-k8s.io/v1beta2/namespaces/ns/machines"},
		{http.MethodGet, "/apis/cluster.x-k8s.io/v1beta2/machines"},
		{http.MethodGet, "/api/v1/namespaces/ns/configmaps/c1-lock"},
		{http.MethodGet, "/api/v1/namespaces/ns/configmaps/machines"},
		{http.MethodGet, "/apis/cluster.x-k8s.io/v1beta2/namespaces/ns/machinesets/machines"},
		{http.MethodDelete, "/apis/cluster.x-k8s.io/v1beta2/namespaces/ns/machines/m1"},
	} {
		resp, err := inj.RoundTrip(httptest.NewRequestWithContext(t.Context(), r.method, "https://api"+r.path, nil))
		if err != nil {
			t.Fatalf("%s %s: %v", r.method, r.path, err)
		}
		_ = resp.Body.Close()
	}
	if want := []string{"mgr-1:m1", "mgr-1:", "mgr-1:"}; !slices.Equal(reads, want) {
		t.Fatalf("reads %q, want %q", reads, want)
	}
}
