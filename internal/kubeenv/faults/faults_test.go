package faults

import (
	"strings"
	"testing"
)

func TestCatalogueIsValid(t *testing.T) {
	if err := validate(catalogue); err != nil {
		t.Fatal(err)
	}
}

func TestValidateFindsBadEntries(t *testing.T) {
	bad := []Entry{
		{Class: "Bad_Name", Group: Request, Meaning: "x"},
		{Class: "twice", Group: Request, Meaning: "x"},
		{Class: "twice", Group: Request, Meaning: "x"},
		{Class: "no-meaning", Group: Request},
		{Class: "nobody", Group: Cache, Meaning: "x", Unmodelled: map[Side]string{Chaos: "a", Explorer: "b"}},
		{Class: "back", Group: Request, Meaning: "x"},
		{Class: "no-reason", Group: Work, Meaning: "x", Unmodelled: map[Side]string{Chaos: " "}},
	}
	err := validate(bad)
	if err == nil {
		t.Fatal("validate found nothing wrong")
	}
	for _, want := range []string{`"Bad_Name"`, "twice is declared twice", "no-meaning: its meaning", "nobody: no side",
		"back: group request after group cache", "no-reason: say why chaos"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("validate: %v\nwant a line with %q", err, want)
		}
	}
}

func TestCheck(t *testing.T) {
	full := Map{}
	for _, c := range Modelled(Chaos) {
		full[c] = []string{"inject " + string(c)}
	}
	if err := Check(Chaos, full); err != nil {
		t.Fatalf("a mapping of every class chaos models: %v", err)
	}
	lacking := Map{}
	for c, n := range full {
		if c != LateWrite {
			lacking[c] = n
		}
	}
	lacking[Refused] = []string{"a 403"}
	lacking["made-up"] = []string{"x"}
	lacking[Pause] = nil
	err := Check(Chaos, lacking)
	for _, want := range []string{"chaos does not map fault class late-write", "maps fault class refused",
		`maps "made-up"`, "maps fault class pause to no name"} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("Check: %v\nwant a line with %q", err, want)
		}
	}
}

func TestTally(t *testing.T) {
	a := Tally{LateWrite: 2, Pause: 1}
	b := Tally{LateWrite: 1, "other": 4}
	sum := a.Add(b)
	if sum[LateWrite] != 3 || sum[Pause] != 1 || sum["other"] != 4 || a[LateWrite] != 2 {
		t.Fatalf("Add = %v (a = %v)", sum, a)
	}
	missing := sum.Missing(Explorer)
	if len(missing) != len(Modelled(Explorer))-2 {
		t.Errorf("Missing = %v", missing)
	}
	f := sum.Format(Explorer)
	if !strings.HasPrefix(f, "server-error=0 lost-response=0 late-write=3 ") || !strings.HasSuffix(f, " other=4") {
		t.Errorf("Format = %q", f)
	}
}
