package benchtest

import (
	"bufio"
	"bytes"
	"fmt"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
)

// stormConfig is the admin rest.Config with the restore storm's client
// limits: none with a negative storm.qps, storm.qps and storm.burst
// otherwise.
func stormConfig() *rest.Config {
	cfg := rest.CopyConfig(env.Config)
	cfg.QPS, cfg.Burst = float32(*stormQPS), *stormBurst
	if *stormQPS < 0 {
		cfg.QPS, cfg.Burst = -1, 0
	}
	return cfg
}

// limits describes the client limits of cfg.
func limits(cfg *rest.Config) string {
	if cfg.QPS < 0 {
		return "no client rate limit"
	}
	return fmt.Sprintf("client QPS %.0f, burst %d", cfg.QPS, cfg.Burst)
}

// usage measures a stretch of a benchmark: its wall time, the requests the
// API server served meanwhile, and the CPU time of this process.
type usage struct {
	start    time.Time
	requests float64
	cpu      time.Duration
}

func startUsage(b *testing.B) *usage {
	b.Helper()
	u := &usage{requests: apiserverRequests(b), cpu: processCPU(b)}
	u.start = time.Now()
	return u
}

func (u *usage) stop(b *testing.B) (time.Duration, float64, time.Duration) {
	b.Helper()
	elapsed := time.Since(u.start)
	return elapsed, apiserverRequests(b) - u.requests, processCPU(b) - u.cpu
}

// processCPU is the user and system CPU time this process has used.
func processCPU(b *testing.B) time.Duration {
	b.Helper()
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		b.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// apiserverRequests is the sum of the API server's own counter
// apiserver_request_total over every label, from its /metrics. The scrape
// itself is one request.
func apiserverRequests(b *testing.B) float64 {
	b.Helper()
	cs, err := kubernetes.NewForConfig(env.Config)
	if err != nil {
		b.Fatal(err)
	}
	raw, err := cs.Discovery().RESTClient().Get().AbsPath("/metrics").DoRaw(b.Context())
	if err != nil {
		b.Fatalf("reading the API server's metrics: %v", err)
	}
	sum, found := 0.0, false
	sc := bufio.NewScanner(bytes.NewReader(raw))
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if !strings.HasPrefix(line, "apiserver_request_total{") {
			continue
		}
		f := strings.Fields(line)
		v, err := strconv.ParseFloat(f[len(f)-1], 64)
		if err != nil {
			b.Fatalf("metric line %q: %v", line, err)
		}
		sum, found = sum+v, true
	}
	if !found {
		b.Fatal("the API server's metrics have no apiserver_request_total")
	}
	return sum
}
