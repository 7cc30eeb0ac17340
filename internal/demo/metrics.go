package demo

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
)

// managerMetrics shows the manager's Prometheus metrics for what it did.
func (d *demo) managerMetrics() {
	tl := d.tl
	tl.chapter("Metrics", "What initlock-manager reports")
	tl.step("Read initlock-manager's Prometheus metrics", func(n note) error {
		lines, err := scrape(d.ctx, d.metricsAddr)
		if err != nil {
			return err
		}
		values := map[string]float64{}
		for _, l := range lines {
			name, v, ok := strings.Cut(l, " ")
			if !ok || strings.Contains(name, "_bucket") {
				continue
			}
			f, err := strconv.ParseFloat(v, 64)
			if err != nil || (f == 0 && !strings.HasSuffix(name, "_total")) {
				continue
			}
			values[name] = f
			n("%s", l)
		}
		if values["initlock_lock_adoptions_total"] < 1 {
			return errors.New("initlock_lock_adoptions_total is below 1")
		}
		if values[`initlock_lock_releases_total{reason="initialized"}`] < 1 {
			return errors.New(`initlock_lock_releases_total{reason="initialized"} is below 1`)
		}
		return nil
	})
}

// scrape returns the initlock_ lines of the manager's metrics.
func scrape(ctx context.Context, addr string) ([]string, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+addr+"/metrics", nil)
	if err != nil {
		return nil, err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, fmt.Errorf("reading the manager's metrics: %w", err)
	}
	defer func() { _ = resp.Body.Close() }()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return nil, err
	}
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("reading the manager's metrics: %s", resp.Status)
	}
	var out []string
	for _, l := range strings.Split(string(b), "\n") {
		if strings.HasPrefix(l, "initlock_") {
			out = append(out, l)
		}
	}
	return out, nil
}
