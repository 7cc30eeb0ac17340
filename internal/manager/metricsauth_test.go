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

	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
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
	reader, other := serviceAccountToken(t, ns, "metrics-reader"), serviceAccountToken(t, ns, "not-a-reader")
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

// serviceAccountToken creates a ServiceAccount and returns a token for it.
func serviceAccountToken(t *testing.T, ns, name string) string {
	t.Helper()
	create(t, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}})
	cs, err := kubernetes.NewForConfig(env.Config)
	if err != nil {
		t.Fatal(err)
	}
	tr, err := cs.CoreV1().ServiceAccounts(ns).CreateToken(t.Context(), name, &authenticationv1.TokenRequest{
		Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: new(int64(600))},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("requesting a token for ServiceAccount %s/%s: %v", ns, name, err)
	}
	return tr.Status.Token
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
