package manager_test

import (
	"crypto/tls"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"testing"
	"time"

	rbacv1 "k8s.io/api/rbac/v1"
	"sigs.k8s.io/yaml"

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
	bindMetricsReader(t, ns, "metrics-reader")
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

// bindMetricsReader creates the metrics-reader ClusterRole of config/rbac
// under a name of the test's own and binds it to the ServiceAccount.
func bindMetricsReader(t *testing.T, ns, sa string) {
	t.Helper()
	root, err := kubeenv.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(filepath.Join(root, "config", "rbac", "metrics_reader_role.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	role := &rbacv1.ClusterRole{}
	if err := yaml.UnmarshalStrict(b, role); err != nil {
		t.Fatalf("reading metrics_reader_role.yaml: %v", err)
	}
	env.BindClusterRole(t, "initlock-metrics-reader-"+ns, role.Rules, rbacv1.Subject{Kind: rbacv1.ServiceAccountKind, Namespace: ns, Name: sa})
}
