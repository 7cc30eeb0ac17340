package managersuite_test

import (
	"net/http"
	"testing"
	"time"

	"github.com/initlock/initlock/test/managertest"
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
	body := managertest.GetOK(t, 30*time.Second, url, reader)
	for _, tc := range []struct {
		what, token string
		want        int
	}{
		{"a token without the metrics-reader binding", other, http.StatusForbidden},
		{"no token", "", http.StatusUnauthorized},
	} {
		code, b, err := managertest.HTTPGet(t, url, tc.token)
		if err != nil || code != tc.want {
			t.Errorf("GET %s with %s: %d %s (%v), want %d", url, tc.what, code, b, err, tc.want)
		}
	}
	return body
}
