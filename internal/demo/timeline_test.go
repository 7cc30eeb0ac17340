package demo

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"
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

func TestIsConfigMapPath(t *testing.T) {
	for path, want := range map[string]bool{
		"/api/v1/namespaces/a/configmaps":             true,
		"/api/v1/namespaces/a/configmaps/c1-lock":     true,
		"/api/v1/namespaces/a/secrets/c1-lock":        false,
		"/apis/events.k8s.io/v1/namespaces/a/events":  false,
		"/apis/cluster.x-k8s.io/v1beta2/configmapish": false,
	} {
		if got := isConfigMapPath(path); got != want {
			t.Errorf("isConfigMapPath(%q) = %t, want %t", path, got, want)
		}
	}
}
