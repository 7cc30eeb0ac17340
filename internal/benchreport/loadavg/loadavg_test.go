package loadavg_test

import (
	"testing"

	"github.com/initlock/initlock/internal/benchreport/loadavg"
)

func TestBusy(t *testing.T) {
	for _, c := range []struct {
		m    map[string]float64
		want bool
	}{
		{map[string]float64{loadavg.Before: 1.5, loadavg.After: 1.9, loadavg.Cores: 2}, false},
		{map[string]float64{loadavg.Before: 1.5, loadavg.After: 2.1, loadavg.Cores: 2}, true},
		{map[string]float64{loadavg.Before: 3, loadavg.After: 0.5, loadavg.Cores: 2}, true},
		{map[string]float64{loadavg.Before: 3, loadavg.After: 3}, false},
		{nil, false},
	} {
		if got := loadavg.Busy(c.m); got != c.want {
			t.Errorf("Busy(%v) = %v, want %v", c.m, got, c.want)
		}
	}
}

func TestRead(t *testing.T) {
	v, ok := loadavg.Read()
	if ok && v < 0 {
		t.Fatalf("load average %v", v)
	}
}
