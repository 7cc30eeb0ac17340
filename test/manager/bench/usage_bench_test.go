package bench

import (
	"fmt"
	"syscall"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
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

// served counts requests by the API server's own apiserver_request_total.
type served struct {
	// all is every request; writes those that change an object (POST,
	// PUT, PATCH, APPLY, DELETE, DELETECOLLECTION); configMapWrites the
	// writes of ConfigMaps.
	all, writes, configMapWrites float64
}

func (s served) minus(o served) served {
	return served{s.all - o.all, s.writes - o.writes, s.configMapWrites - o.configMapWrites}
}

// startUsage starts measuring a stretch of a benchmark; the function it
// returns ends the stretch and returns its wall time, the requests the API
// server served meanwhile, and the CPU time of this process.
func startUsage(b *testing.B) func(*testing.B) (time.Duration, served, time.Duration) {
	b.Helper()
	requests, cpu, start := apiserverRequests(b), processCPU(b), time.Now()
	return func(b *testing.B) (time.Duration, served, time.Duration) {
		b.Helper()
		elapsed := time.Since(start)
		return elapsed, apiserverRequests(b).minus(requests), processCPU(b) - cpu
	}
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

// writeVerbs are the verbs of apiserver_request_total that change objects.
var writeVerbs = map[string]bool{"POST": true, "PUT": true, "PATCH": true, "APPLY": true, "DELETE": true, "DELETECOLLECTION": true}

// apiserverRequests sums the API server's own counter apiserver_request_total
// from its /metrics: over every label, over the write verbs, and over the
// write verbs of ConfigMaps. Every client counts, the control plane's own
// controllers included; the scrape itself is one request.
func apiserverRequests(b *testing.B) served {
	b.Helper()
	m, err := env.Metrics(b.Context())
	if err != nil {
		b.Fatal(err)
	}
	const total = "apiserver_request_total"
	if len(m[total].GetMetric()) == 0 {
		b.Fatalf("the API server's metrics have no %s", total)
	}
	var s served
	m.Each(total, func(l map[string]string, sample *dto.Metric) {
		v := sample.GetCounter().GetValue()
		s.all += v
		if writeVerbs[l["verb"]] {
			s.writes += v
			if l["resource"] == "configmaps" && l["group"] == "" {
				s.configMapWrites += v
			}
		}
	})
	return s
}
