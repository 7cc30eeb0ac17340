package stack

import (
	"strings"
	"testing"
)

// TestParseAudit: the event the API server is still writing, after the
// last newline, is left for the next read; a complete line that is not an
// event is an error naming the line.
func TestParseAudit(t *testing.T) {
	const create = `{"stage":"ResponseComplete","verb":"create","user":{"username":"u"},"objectRef":{"resource":"configmaps","namespace":"ns","name":"c-lock"},"responseStatus":{"code":201},"stageTimestamp":"2026-12-07T10:00:00Z"}` + "\n"
	const started = `{"stage":"RequestReceived","verb":"delete"}` + "\n"
	for _, tc := range []struct {
		name, log string
		want      int
		err       string
	}{
		{"empty", "", 0, ""},
		{"complete", started + create, 1, ""},
		{"one being written", create + create[:40], 1, ""},
		{"only one being written", create[:40], 0, ""},
		{"not an event", create + "{\n", 0, "line 2: "},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ws, err := parseAudit([]byte(tc.log))
			if tc.err != "" {
				if err == nil || !strings.HasPrefix(err.Error(), tc.err) {
					t.Fatalf("err = %v, want one starting %q", err, tc.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if len(ws) != tc.want {
				t.Fatalf("%d writes, want %d: %+v", len(ws), tc.want, ws)
			}
			if tc.want == 1 && (ws[0].User != "u" || ws[0].Verb != "create" || ws[0].Name != "c-lock" || ws[0].Code != 201) {
				t.Errorf("write = %+v", ws[0])
			}
		})
	}
}
