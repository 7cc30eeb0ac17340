package alerts_test

import (
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net/http"
	"testing"
	"time"

	"github.com/prometheus/prometheus/model/labels"
	"github.com/prometheus/prometheus/model/textparse"
)

// target is the manager's metrics endpoint as Prometheus scrapes it.
type target struct {
	url, token string
	// instance is the instance label of its series.
	instance string
}

// get scrapes tg as Prometheus does: its bearer token, the scrape
// protocols Prometheus accepts, the manager's self-signed certificate.
func get(t *testing.T, tg target) ([]byte, string, error) {
	req, err := http.NewRequestWithContext(t.Context(), http.MethodGet, tg.url, nil)
	if err != nil {
		return nil, "", err
	}
	req.Header.Set("Authorization", "Bearer "+tg.token)
	req.Header.Set("Accept", "text/plain;version=0.0.4;q=0.5,*/*;q=0.1")
	c := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}} //nolint:gosec // the manager's self-signed certificate (the ServiceMonitor verifies the operator's; test/release scrapes so)
	resp, err := c.Do(req)
	if err != nil {
		return nil, "", err
	}
	defer func() { _ = resp.Body.Close() }()
	b, err := io.ReadAll(resp.Body)
	if err == nil && resp.StatusCode != http.StatusOK {
		err = fmt.Errorf("GET %s: %s: %s", tg.url, resp.Status, b)
	}
	return b, resp.Header.Get("Content-Type"), err
}

// parse reads the float samples of a scrape with Prometheus's own parser.
func parse(t *testing.T, body []byte, contentType string) []sample {
	t.Helper()
	p, err := textparse.New(body, contentType, labels.NewSymbolTable(), textparse.ParserOptions{})
	if err != nil {
		t.Fatalf("parsing the scrape (%s): %v", contentType, err)
	}
	var out []sample
	for {
		e, err := p.Next()
		if errors.Is(err, io.EOF) {
			return out
		}
		if err != nil {
			t.Fatalf("parsing the scrape: %v", err)
		}
		if e != textparse.EntrySeries {
			continue
		}
		var l labels.Labels
		p.Labels(&l)
		_, _, v := p.Series()
		out = append(out, sample{labels: l, value: v})
	}
}
