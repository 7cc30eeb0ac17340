package cli

import (
	"bytes"
	"regexp"
	"testing"
)

// The table puts the items and the remedy of a check under its detail;
// with colour, it shows the same once the escape sequences are taken out.
func TestPrintDoctor(t *testing.T) {
	r := newDoctorReport("v0.1.0", []DoctorCheck{
		{Name: "lock-guard", Status: CheckOK, Detail: "in force"},
		{Name: "velero-plugin", Status: CheckWarn, Detail: "by digest", Remedy: "compare the digest"},
		{Name: "locks", Status: CheckFail, Detail: "1 lock needs a person", Remedy: "kubectl initlock list -A -o wide", Items: []string{"capi/c1-lock (corrupt): release it"}},
		{Name: "manager-rbac", Status: CheckSkipped, Detail: "no manager"},
	})
	want := `CHECK          STATUS   DETAIL
lock-guard     ok       in force
velero-plugin  warn     by digest
                        remedy: compare the digest
locks          fail     1 lock needs a person
                        - capi/c1-lock (corrupt): release it
                        remedy: kubectl initlock list -A -o wide
manager-rbac   skipped  no manager

1 check failed (1 ok, 1 warn, 1 fail, 1 skipped): see the remedies above.
`
	var plain, coloured bytes.Buffer
	if err := printDoctor(&plain, r, false); err != nil || plain.String() != want {
		t.Errorf("printDoctor = %v:\n%s\nwant:\n%s", err, plain.String(), want)
	}
	if err := printDoctor(&coloured, r, true); err != nil {
		t.Fatal(err)
	}
	escapes := regexp.MustCompile("\x1b\\[[0-9]+m")
	if got := escapes.ReplaceAllString(coloured.String(), ""); got != want || coloured.String() == want {
		t.Errorf("coloured, without its escapes:\n%s\nwant:\n%s", got, want)
	}
}
