package bench

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
	requests served
	cpu      time.Duration
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

func startUsage(b *testing.B) *usage {
	b.Helper()
	u := &usage{requests: apiserverRequests(b), cpu: processCPU(b)}
	u.start = time.Now()
	return u
}

func (u *usage) stop(b *testing.B) (time.Duration, served, time.Duration) {
	b.Helper()
	elapsed := time.Since(u.start)
	return elapsed, apiserverRequests(b).minus(u.requests), processCPU(b) - u.cpu
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
	cs, err := kubernetes.NewForConfig(env.Config)
	if err != nil {
		b.Fatal(err)
	}
	raw, err := cs.Discovery().RESTClient().Get().AbsPath("/metrics").DoRaw(b.Context())
	if err != nil {
		b.Fatalf("reading the API server's metrics: %v", err)
	}
	var s served
	found := false
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
		s.all, found = s.all+v, true
		if writeVerbs[label(line, "verb")] {
			s.writes += v
			if label(line, "resource") == "configmaps" && label(line, "group") == "" {
				s.configMapWrites += v
			}
		}
	}
	if !found {
		b.Fatal("the API server's metrics have no apiserver_request_total")
	}
	return s
}

// label is the value of a label in a Prometheus text-format line, "" when
// absent.
func label(line, name string) string {
	_, rest, ok := strings.Cut(line, "{"+name+`="`)
	if !ok {
		if _, rest, ok = strings.Cut(line, ","+name+`="`); !ok {
			return ""
		}
	}
	v, _, _ := strings.Cut(rest, `"`)
	return v
}
