package manager

import (
	"crypto/tls"
	"sync"

	"github.com/prometheus/client_golang/prometheus"
	"sigs.k8s.io/controller-runtime/pkg/metrics"
	"sigs.k8s.io/controller-runtime/pkg/metrics/filters"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	"github.com/initlock/initlock/internal/version"
)

// The HTTPS metrics server authenticates each scrape's bearer token with a
// TokenReview and authorises it with a SubjectAccessReview.
// +kubebuilder:rbac:groups=authentication.k8s.io,resources=tokenreviews,verbs=create
// +kubebuilder:rbac:groups=authorization.k8s.io,resources=subjectaccessreviews,verbs=create

// BuildInfoMetric is the gauge, always 1, whose labels name the running
// build.
const BuildInfoMetric = "initlock_build_info"

var registerBuildInfo = sync.OnceFunc(func() {
	info := version.Get()
	g := prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: BuildInfoMetric,
		Help: "The build of initlock-manager that is running: always 1, with its version, VCS revision and Go version as labels.",
	}, []string{"version", "revision", "goversion"})
	g.WithLabelValues(info.Version, info.Revision, info.GoVersion).Set(1)
	metrics.Registry.MustRegister(g)
})

// metricsOptions configures controller-runtime's metrics server: plain HTTP,
// or HTTPS behind the authentication and authorisation filter, with the
// certificate of MetricsCertDir or a self-signed one, and HTTP/2 only when
// asked for.
func metricsOptions(opts Options) metricsserver.Options {
	mo := metricsserver.Options{BindAddress: bindAddress(opts.MetricsBindAddress)}
	if !opts.MetricsSecure {
		return mo
	}
	mo.SecureServing = true
	mo.FilterProvider = filters.WithAuthenticationAndAuthorization
	mo.CertDir = opts.MetricsCertDir
	if !opts.EnableHTTP2 {
		mo.TLSOpts = append(mo.TLSOpts, func(c *tls.Config) { c.NextProtos = []string{"http/1.1"} })
	}
	return mo
}
