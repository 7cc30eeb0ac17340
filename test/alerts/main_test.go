package alerts_test

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"k8s.io/client-go/rest"

	"github.com/initlock/initlock/internal/kubeenv"
	"github.com/initlock/initlock/internal/manager"
	"github.com/initlock/initlock/test/managertest"
)

var env *kubeenv.Env

// The control plane runs with the lock guard, as config/default installs
// it with the manager.
func TestMain(m *testing.M) { kubeenv.Main(m, kubeenv.Options{LockGuard: true}, &env) }

// startManager runs the manager in process on ns as cfg (the
// administrator's when nil), its metrics served over HTTPS as config/
// installs it, changed by mutate, and returns it with its endpoint as the
// ServiceMonitor scrapes it: with the token of a ServiceAccount bound to
// the metrics-reader ClusterRole of config/rbac, as Prometheus's is.
func startManager(t *testing.T, ns string, cfg *rest.Config, mutate ...func(*manager.Options)) (*kubeenv.Running, target) {
	t.Helper()
	if cfg == nil {
		cfg = env.Config
	}
	addr := kubeenv.FreeAddress(t)
	opts := managertest.Options(ns)
	opts.MetricsBindAddress, opts.MetricsSecure = addr, true
	for _, f := range mutate {
		f(&opts)
	}
	rm := managertest.Start(t, cfg, opts)
	m := readMonitoring(t)
	tg := target{url: m.scheme + "://" + addr + m.path, token: prometheusToken(t, ns), instance: addr}
	kubeenv.Eventually(t, 30*time.Second, func() error {
		_, _, err := get(t, tg)
		return err
	})
	return rm, tg
}

// tokens are the tokens prometheusToken made, by namespace.
var tokens = map[string]string{}

// prometheusToken returns the token of a ServiceAccount of ns bound to the
// metrics-reader ClusterRole of config/rbac.
func prometheusToken(t *testing.T, ns string) string {
	t.Helper()
	if token, ok := tokens[ns]; ok {
		return token
	}
	env.BindMetricsReader(t, ns, "prometheus")
	tokens[ns] = env.ServiceAccountToken(t, ns, "prometheus")
	return tokens[ns]
}

// waitForMetric waits until a scrape of tg shows the series of name whose
// labels include want with the value v: the manager has seen the
// situation.
func waitForMetric(t *testing.T, tg target, name string, want map[string]string, v float64) {
	t.Helper()
	waitFor(t, tg, name, want, fmt.Sprint(v), func(got float64) bool { return got == v })
}

// waitForCount waits until the counter name, with the labels of want, has
// reached at least v.
func waitForCount(t *testing.T, tg target, name string, want map[string]string, v float64) {
	t.Helper()
	waitFor(t, tg, name, want, fmt.Sprintf("at least %g", v), func(got float64) bool { return got >= v })
}

func waitFor(t *testing.T, tg target, name string, want map[string]string, what string, ok func(float64) bool) {
	t.Helper()
	kubeenv.Eventually(t, 60*time.Second, func() error {
		body, contentType, err := get(t, tg)
		if err != nil {
			return err
		}
		var seen []string
	samples:
		for _, s := range parse(t, body, contentType) {
			if s.labels.Get("__name__") != name {
				continue
			}
			for k, wv := range want {
				if s.labels.Get(k) != wv {
					continue samples
				}
			}
			if ok(s.value) {
				return nil
			}
			seen = append(seen, fmt.Sprintf("%s %g", s.labels, s.value))
		}
		return errors.New(name + " " + fmt.Sprint(want) + " is not " + what + " yet: " + strings.Join(seen, ", "))
	})
}
