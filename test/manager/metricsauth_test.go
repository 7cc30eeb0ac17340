package managersuite_test

import (
	"crypto/tls"
	"fmt"
	"io"
	"net/http"
	"testing"
	"time"

	"github.com/initlock/initlock/internal/kubeenv"
)

// scrapeMetrics checks the HTTPS metrics endpoint at addr the way a
// Prometheus in the cluster reaches it: a ServiceAccount token bound to the
// metrics-reader ClusterRole of config/rbac reads /metrics, whose body it
// returns; a token without that binding gets 403 and a request without a
// token 401.
func scrapeMetrics(t *testing.T, ns, addr string) string {
	t.Helper()
	reader, other := env.ServiceAccountToken(t, ns, "metrics-reader"), env.ServiceAccountToken(t, ns, "not-a-reader")
	env.BindMetricsReader(t, ns, "metrics-reader")
	url := "https://" + addr + "/metrics"
	var body string
	kubeenv.Eventually(t, 30*time.Second, func() error {
		code, b, err := getWithToken(t, url, reader)
		if err != nil {
			return err
		}
		if code != http.StatusOK {
			return fmt.Errorf("GET %s with the metrics-reader token: %d %s", url, code, b)
		}
		body = b
		return nil
	})
	for _, tc := range []struct {
		what, token string
		want        int
	}{
		{"a token without the metrics-reader binding", other, http.StatusForbidden},
		{"no token", "", http.StatusUnauthorized},
	} {
		code, b, err := getWithToken(t, url, tc.token)
		if err != nil || code != tc.want {
			t.Errorf("GET %s with %s: %d %s (%v), want %d", url, tc.what, code, b, err, tc.want)
		}
	}
	return body
}

func getWithToken(t *testing.T, url, token string) (int, string, error) {
	req, err := http.NewRequestWithContext(t.Context(), http.MethodGet, url, nil)
	if err != nil {
		return 0, "", err
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	// The manager serves a self-signed certificate by default.
	c := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}} //nolint:gosec // a self-signed test certificate
	resp, err := c.Do(req)
	if err != nil {
		return 0, "", err
	}
	defer func() { _ = resp.Body.Close() }()
	b, err := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b), err
}
