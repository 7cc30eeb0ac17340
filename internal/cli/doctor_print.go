package cli

import (
	"fmt"
	"io"
	"strings"
)

// printDoctor prints the report as a table, one row per check, with the
// check's items and remedy on the rows below it, then a summary line.
// With colour, every cell of the status column is wrapped in escape
// sequences of the same length, so that the columns stay aligned.
func printDoctor(w io.Writer, r DoctorReport, colour bool) error {
	t := newTable(w, false)
	status := func(s string) string {
		if !colour {
			return s
		}
		c := sgrDefault
		switch s {
		case CheckOK:
			c = sgrGreen
		case CheckWarn:
			c = sgrYellow
		case CheckFail, CheckUnknown:
			c = sgrRed
		}
		return c + s + sgrReset
	}
	t.row("CHECK", status("STATUS"), "DETAIL")
	for _, c := range r.Checks {
		t.row(c.Name, status(c.Status), c.Detail)
		for _, item := range c.Items {
			t.row("", status(""), "- "+item)
		}
		if c.Remedy != "" {
			t.row("", status(""), "remedy: "+c.Remedy)
		}
	}
	if err := t.flush(); err != nil {
		return err
	}
	_, err := fmt.Fprintf(w, "\n%s\n", doctorSummary(r))
	return err
}

// doctorSummary says in one line whether a check failed, with the count
// of each status.
func doctorSummary(r DoctorReport) string {
	s := r.Summary
	var counts []string
	for _, c := range []struct {
		n    int
		name string
	}{{s.OK, CheckOK}, {s.Warn, CheckWarn}, {s.Fail, CheckFail}, {s.Unknown, CheckUnknown}, {s.Skipped, CheckSkipped}} {
		if c.n > 0 {
			counts = append(counts, fmt.Sprintf("%d %s", c.n, c.name))
		}
	}
	all := strings.Join(counts, ", ")
	if r.Healthy {
		return fmt.Sprintf("No check failed (%s).", all)
	}
	failed := s.Fail + s.Unknown
	return fmt.Sprintf("%d %s (%s): see the remedies above.", failed, plural(failed, "check failed", "checks failed"), all)
}
