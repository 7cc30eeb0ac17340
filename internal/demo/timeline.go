package demo

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"time"
)

// Outcome is the result of a step.
type Outcome string

// Outcomes.
const (
	// Pass: the step did what it shows.
	Pass Outcome = "PASS"
	// Fail: the step did not; the demo exits non-zero.
	Fail Outcome = "FAIL"
	// Skip: an earlier step of the same part failed or the demo was
	// interrupted, so the step did not run.
	Skip Outcome = "SKIP"
)

// Step is one line of the timeline.
type Step struct {
	// Part is the part of the story the step belongs to.
	Part string
	// Title says what the step does.
	Title string
	// At is when the step started, from the start of the demo.
	At time.Duration
	// Took is how long it took.
	Took time.Duration
	// Outcome is PASS, FAIL or SKIP.
	Outcome Outcome
}

// timeline runs steps and prints them as they happen.
type timeline struct {
	ctx    context.Context
	out    io.Writer
	colour bool
	start  time.Time
	steps  []*Step
	part   string
	// broken is set once a step of the current part failed.
	broken bool
	// chapters counts the numbered parts begun.
	chapters int
}

func newTimeline(ctx context.Context, out io.Writer, colour bool) *timeline {
	return &timeline{ctx: ctx, out: out, colour: colour, start: time.Now()}
}

// begin starts a part of the story: a heading and what it shows.
func (t *timeline) begin(part, heading string, intro ...string) {
	t.part, t.broken = part, false
	t.printf("\n%s\n", t.paint(bold, "== "+heading+" =="))
	for _, l := range intro {
		t.printf("   %s\n", l)
	}
}

// chapter begins the next numbered part of the story.
func (t *timeline) chapter(part, heading string, intro ...string) {
	t.chapters++
	prefix := fmt.Sprintf("%d. ", t.chapters)
	t.begin(prefix+part, prefix+heading, intro...)
}

// note adds what happened to the running step.
type note func(format string, args ...any)

// step runs f as the next step of the current part and prints it. It
// returns false when the step failed or was skipped, so that callers can
// leave out what depends on it.
func (t *timeline) step(title string, f func(n note) error) bool {
	s := &Step{Part: t.part, Title: title, At: time.Since(t.start)}
	t.steps = append(t.steps, s)
	num := len(t.steps)
	if t.broken || t.ctx.Err() != nil {
		s.Outcome = Skip
		t.printf("%s [%2d] %s  %s\n", clock(s.At), num, title, t.paint(yellow, string(Skip)))
		return false
	}
	t.printf("%s [%2d] %s\n", clock(s.At), num, title)
	started := time.Now()
	err := f(func(format string, args ...any) {
		t.printf("%s %s\n", strings.Repeat(" ", 13), fmt.Sprintf(format, args...))
	})
	s.Took = time.Since(started)
	if err != nil {
		if t.ctx.Err() != nil && errors.Is(err, context.Canceled) {
			err = errInterrupted
		}
		s.Outcome, t.broken = Fail, true
		t.printf("%s %s %s: %v\n", strings.Repeat(" ", 13), t.paint(red, string(Fail)), duration(s.Took), err)
		return false
	}
	s.Outcome = Pass
	t.printf("%s %s %s\n", strings.Repeat(" ", 13), t.paint(green, string(Pass)), duration(s.Took))
	return true
}

// summary prints every step in a table and the totals.
func (t *timeline) summary() {
	t.printf("\n%s\n", t.paint(bold, "== Timeline =="))
	t.printf("   %-4s %-8s %-9s %-9s %s\n", "step", "at", "took", "result", "what")
	counts := map[Outcome]int{}
	part := ""
	for i, s := range t.steps {
		counts[s.Outcome]++
		if s.Part != part {
			part = s.Part
			t.printf("   %s\n", t.paint(bold, part))
		}
		took := duration(s.Took)
		if s.Outcome == Skip {
			took = "-"
		}
		t.printf("   %-4d %-8s %-9s %s %s\n", i+1, clock(s.At), took, t.paint(colourOf(s.Outcome), fmt.Sprintf("%-9s", s.Outcome)), s.Title)
	}
	t.printf("   %d steps: %d %s, %d %s, %d %s, in %s\n", len(t.steps),
		counts[Pass], Pass, counts[Fail], Fail, counts[Skip], Skip, duration(time.Since(t.start)))
}

func (t *timeline) failed() bool {
	for _, s := range t.steps {
		if s.Outcome != Pass {
			return true
		}
	}
	return false
}

// err is what the demo returns once the story is told: nil when every step
// passed, errInterrupted when one did not and the context is cancelled,
// ErrFailed otherwise.
func (t *timeline) err() error {
	switch {
	case !t.failed():
		return nil
	case t.ctx.Err() != nil:
		return errInterrupted
	}
	return ErrFailed
}

func (t *timeline) printf(format string, args ...any) {
	_, _ = fmt.Fprintf(t.out, format, args...)
}

type colour string

const (
	bold   colour = "1"
	red    colour = "31"
	green  colour = "32"
	yellow colour = "33"
)

func colourOf(o Outcome) colour {
	switch o {
	case Pass:
		return green
	case Fail:
		return red
	}
	return yellow
}

func (t *timeline) paint(c colour, s string) string {
	if !t.colour {
		return s
	}
	return "\x1b[" + string(c) + "m" + s + "\x1b[0m"
}

// clock formats a time since the start as mm:ss.s.
func clock(d time.Duration) string {
	d = d.Round(100 * time.Millisecond)
	m := int(d / time.Minute)
	s := (d % time.Minute).Seconds()
	return fmt.Sprintf("%02d:%04.1f", m, s)
}

// duration formats how long something took: milliseconds below a second.
func duration(d time.Duration) string {
	if d < time.Second {
		return fmt.Sprintf("%dms", d.Milliseconds())
	}
	return fmt.Sprintf("%.2fs", d.Seconds())
}
