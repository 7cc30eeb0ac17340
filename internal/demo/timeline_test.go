package demo

import (
	"context"
	"errors"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"k8s.io/client-go/rest"

	"github.com/initlock/initlock/internal/kubeenv"
)

func TestTimeline(t *testing.T) {
	pass := func(note) error { return nil }
	fail := func(note) error { return errors.New("boom") }
	tests := []struct {
		name string
		// parts: each part's steps, true for a passing step.
		parts      [][]bool
		cancel     bool
		want       []Outcome
		wantFailed bool
	}{
		{name: "all pass", parts: [][]bool{{true, true}, {true}}, want: []Outcome{Pass, Pass, Pass}},
		{name: "a failure skips the rest of its part only", parts: [][]bool{{true, false, true}, {true}},
			want: []Outcome{Pass, Fail, Skip, Pass}, wantFailed: true},
		{name: "cancelled: every step skipped", parts: [][]bool{{true}, {true}}, cancel: true,
			want: []Outcome{Skip, Skip}, wantFailed: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ctx, cancel := context.WithCancel(t.Context())
			defer cancel()
			if tt.cancel {
				cancel()
			}
			var out strings.Builder
			tl := newTimeline(ctx, &out, false)
			for i, part := range tt.parts {
				tl.begin("part", "Part "+string(rune('A'+i)))
				for _, ok := range part {
					f := fail
					if ok {
						f = pass
					}
					got := tl.step("a step", f)
					if want := tl.steps[len(tl.steps)-1].Outcome == Pass; got != want {
						t.Errorf("step returned %t, want %t", got, want)
					}
				}
			}
			tl.summary()
			var got []Outcome
			for _, s := range tl.steps {
				got = append(got, s.Outcome)
			}
			if strings.Join(outcomes(got), " ") != strings.Join(outcomes(tt.want), " ") {
				t.Errorf("outcomes %v, want %v\n%s", got, tt.want, out.String())
			}
			if tl.failed() != tt.wantFailed {
				t.Errorf("failed() = %t, want %t", tl.failed(), tt.wantFailed)
			}
			if !strings.Contains(out.String(), "== Timeline ==") {
				t.Errorf("no summary:\n%s", out.String())
			}
		})
	}
}

func outcomes(os []Outcome) []string {
	var out []string
	for _, o := range os {
		out = append(out, string(o))
	}
	return out
}

func TestFormats(t *testing.T) {
	for _, tt := range []struct {
		d             time.Duration
		clock, length string
	}{
		{0, "00:00.0", "0ms"},
		{999 * time.Millisecond, "00:01.0", "999ms"},
		{5130 * time.Millisecond, "00:05.1", "5.13s"},
		{75 * time.Second, "01:15.0", "75.00s"},
	} {
		if got := clock(tt.d); got != tt.clock {
			t.Errorf("clock(%s) = %q, want %q", tt.d, got, tt.clock)
		}
		if got := duration(tt.d); got != tt.length {
			t.Errorf("duration(%s) = %q, want %q", tt.d, got, tt.length)
		}
	}
}

// TestWriteCounter: take counts the ConfigMap writes since the last take,
// by verb, with those refused for a conflict and those that failed apart,
// and leaves out reads and writes of other resources.
func TestWriteCounter(t *testing.T) {
	answers := map[string]int{
		"PATCH /api/v1/namespaces/a/configmaps/c1-lock":       http.StatusOK,
		"PUT /api/v1/namespaces/a/configmaps/c2-lock":         http.StatusConflict,
		"DELETE /api/v1/namespaces/a/configmaps/c3-lock":      http.StatusInternalServerError,
		"POST /api/v1/namespaces/a/configmaps":                http.StatusCreated,
		"GET /api/v1/namespaces/a/configmaps/c1-lock":         http.StatusOK,
		"PATCH /api/v1/namespaces/a/secrets/c1-lock":          http.StatusOK,
		"POST /apis/events.k8s.io/v1/namespaces/a/events":     http.StatusCreated,
		"PATCH /apis/cluster.x-k8s.io/v1beta2/configmapish/x": http.StatusOK,
	}
	var w writeCounter
	cfg := w.wrap(&rest.Config{Host: "http://apiserver.test", Transport: kubeenv.RoundTripperFunc(func(req *http.Request) (*http.Response, error) {
		return &http.Response{StatusCode: answers[req.Method+" "+req.URL.Path], Body: io.NopCloser(strings.NewReader("{}")), Request: req}, nil
	})})
	hc, err := rest.HTTPClientFor(cfg)
	if err != nil {
		t.Fatal(err)
	}
	send := func() {
		for call := range answers {
			method, path, _ := strings.Cut(call, " ")
			req, err := http.NewRequestWithContext(t.Context(), method, "http://apiserver.test"+path, nil)
			if err != nil {
				t.Fatal(err)
			}
			resp, err := hc.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			_ = resp.Body.Close()
		}
	}
	send()
	if n, desc := w.take(); n != 2 || desc != "1 create, 1 patch, 1 refused for a conflict, 1 failed" {
		t.Errorf("take = %d, %q", n, desc)
	}
	if n, desc := w.take(); n != 0 || desc != "no write" {
		t.Errorf("take again = %d, %q, want nothing new", n, desc)
	}
	send()
	if n, _ := w.take(); n != 2 {
		t.Errorf("take after more writes = %d, want 2", n)
	}
}
