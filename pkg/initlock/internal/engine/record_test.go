package engine_test

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/initlock/initlock/pkg/initlock/internal/engine"
	"github.com/initlock/initlock/pkg/initlock/internal/report"
)

func TestLockName(t *testing.T) {
	tests := []struct {
		cluster string
		want    string
		wantErr bool
	}{
		{cluster: "c1", want: "c1-lock"},
		{cluster: "my.cluster-1", want: "my.cluster-1-lock"},
		{cluster: "", wantErr: true},
		{cluster: "Upper", wantErr: true},
		{cluster: "under_score", wantErr: true},
		{cluster: strings.Repeat("a", 63), want: strings.Repeat("a", 63) + "-lock"},
		{cluster: strings.Repeat("a", 64), wantErr: true},  // not a label value
		{cluster: strings.Repeat("a", 249), wantErr: true}, // lock name over 253
	}
	for _, tt := range tests {
		got, err := engine.LockName(tt.cluster)
		if tt.wantErr {
			if !errors.Is(err, report.ErrInvalidName) {
				t.Errorf("LockName(%.20q) error = %v, want ErrInvalidName", tt.cluster, err)
			}
			continue
		}
		if err != nil || got != tt.want {
			t.Errorf("LockName(%.20q) = %q, %v; want %q", tt.cluster, got, err, tt.want)
		}
	}
}

func TestDecodeRecord(t *testing.T) {
	corrupt, other := report.ErrCorruptLock, report.ErrNotALock
	tests := []struct {
		data    string
		want    string
		wantErr error
	}{
		{data: `{"machineName":"m1"}`, want: "m1"},
		{data: `{"machineName":"m1","machineUID":"u","acquiredAt":"2026-12-02T12:00:00Z","future":1}`, want: "m1"},
		{data: `{"MachineName":"m1"}`, want: "m1"}, // Go's decoders, CABPK's among them, match fields in any case
		{data: `{"machineName":""}`, wantErr: corrupt},
		{data: `{}`, wantErr: other},
		{data: `{"kkInstanceName":"kk-0"}`, wantErr: other}, // KubeKey's lock
		{data: `null`, wantErr: corrupt},
		{data: `not json`, wantErr: corrupt},
		{data: ``, wantErr: corrupt},
		{data: `["m1"]`, wantErr: corrupt},
		{data: `{"machineName":7}`, wantErr: corrupt},
		{data: `{"machineName":"  "}`, wantErr: corrupt},
		{data: `{"machineName":"M1"}`, wantErr: corrupt},
		{data: `{"machineName":"cp-0.example"}`, want: "cp-0.example"},
	}
	for _, tt := range tests {
		r, err := engine.DecodeRecord(tt.data)
		if tt.wantErr != nil {
			if !errors.Is(err, tt.wantErr) || engine.OtherProvidersLock(err) != errors.Is(tt.wantErr, other) {
				t.Errorf("DecodeRecord(%q) error = %v, want %v", tt.data, err, tt.wantErr)
			}
			continue
		}
		if err != nil || r.MachineName != tt.want {
			t.Errorf("DecodeRecord(%q) = %+v, %v; want machine %q", tt.data, r, err, tt.want)
		}
	}
}

// TestRecordIsReadByUpstreamDecoders checks that a record written here
// decodes into the struct the upstream providers use.
func TestRecordIsReadByUpstreamDecoders(t *testing.T) {
	var upstream struct {
		MachineName string `json:"machineName"`
	}
	rec := engine.Record{Ref: engine.Ref{MachineName: "m1", MachineUID: "uid-1"}, AcquiredAt: ptr(t0)}
	if err := json.Unmarshal([]byte(rec.Encode()), &upstream); err != nil {
		t.Fatal(err)
	}
	if upstream.MachineName != "m1" {
		t.Fatalf("upstream decoder read machineName %q, want m1", upstream.MachineName)
	}
}

func FuzzDecodeRecord(f *testing.F) {
	for _, s := range []string{`{"machineName":"m1"}`, `{"machineName":"m1","machineUID":"u","acquiredAt":"2026-12-02T12:00:00Z"}`, `{}`, `null`, `"x"`, `{"acquiredAt":"bad"}`} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, data string) {
		r, err := engine.DecodeRecord(data)
		if err != nil {
			if !errors.Is(err, report.ErrCorruptLock) && !engine.OtherProvidersLock(err) {
				t.Fatalf("DecodeRecord(%q): error %v wraps neither ErrCorruptLock nor another provider's lock", data, err)
			}
			return
		}
		if r.MachineName == "" {
			t.Fatalf("DecodeRecord(%q) accepted a record without a machine", data)
		}
		again, err := engine.DecodeRecord(r.Encode())
		if err != nil || again.MachineName != r.MachineName || again.MachineUID != r.MachineUID {
			t.Fatalf("round trip of %q: %+v, %v", data, again, err)
		}
	})
}
