//go:build release

package release_test

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	"github.com/initlock/initlock/internal/kubeenv"
)

// The names the monitoring of a release and its documentation agree on.
const (
	// metricsCertSecret is the Secret the operator provides: the manager's
	// serving certificate and the CA that signed it.
	metricsCertSecret = "initlock-metrics-cert"
	// installNamespace is the namespace of install.yaml.
	installNamespace = "initlock-system"
)

// objects reads the objects of a file of the release.
func objects(t *testing.T, name string) []*unstructured.Unstructured {
	t.Helper()
	objs, err := kubeenv.ReadObjects(filepath.Join(distDir(t), name))
	if err != nil {
		t.Fatal(err)
	}
	if len(objs) == 0 {
		t.Fatalf("%s holds no object", name)
	}
	return objs
}

// find returns the one object of kind in objs.
func find(t *testing.T, objs []*unstructured.Unstructured, kind string) *unstructured.Unstructured {
	t.Helper()
	var found []*unstructured.Unstructured
	for _, o := range objs {
		if o.GetKind() == kind {
			found = append(found, o)
		}
	}
	if len(found) != 1 {
		t.Fatalf("%d objects of kind %s, want 1", len(found), kind)
	}
	return found[0]
}

// named returns the object of kind and name in objs, nil when there is none.
func named(objs []*unstructured.Unstructured, kind, name string) *unstructured.Unstructured {
	for _, o := range objs {
		if o.GetKind() == kind && o.GetName() == name {
			return o
		}
	}
	return nil
}

func str(t *testing.T, o *unstructured.Unstructured, fields ...string) string {
	t.Helper()
	v, _, err := unstructured.NestedString(o.Object, fields...)
	if err != nil {
		t.Fatalf("%s %s: %v", o.GetKind(), strings.Join(fields, "."), err)
	}
	return v
}

// endpoint is the one endpoint of the ServiceMonitor of monitoring.yaml.
func endpoint(t *testing.T) *unstructured.Unstructured {
	t.Helper()
	sm := find(t, objects(t, "monitoring.yaml"), "ServiceMonitor")
	eps, _, err := unstructured.NestedSlice(sm.Object, "spec", "endpoints")
	if err != nil || len(eps) != 1 {
		t.Fatalf("the ServiceMonitor has %d endpoints (%v), want 1", len(eps), err)
	}
	return &unstructured.Unstructured{Object: eps[0].(map[string]any)}
}

var installCRDs sync.Once

// installMonitoringCRDs installs the ServiceMonitor and PrometheusRule CRDs
// of the Prometheus Operator that hack/pins/prometheus-operator pins.
func installMonitoringCRDs(t *testing.T) {
	t.Helper()
	var err error
	installCRDs.Do(func() {
		var dir string
		if dir, err = kubeenv.ModuleDir("hack/pins/prometheus-operator", "github.com/prometheus-operator/prometheus-operator"); err != nil {
			return
		}
		crds := filepath.Join(dir, "example", "prometheus-operator-crd")
		_, err = envtest.InstallCRDs(env.Config, envtest.CRDInstallOptions{Paths: []string{
			filepath.Join(crds, "monitoring.coreos.com_servicemonitors.yaml"),
			filepath.Join(crds, "monitoring.coreos.com_prometheusrules.yaml"),
		}, ErrorIfPathMissing: true})
	})
	if err != nil {
		t.Fatalf("installing the Prometheus Operator's CRDs: %v", err)
	}
}

// ensureNamespace creates the namespace of the install for real: a dry run
// validates namespaced objects only in a namespace that exists.
func ensureNamespace(t *testing.T) {
	t.Helper()
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: installNamespace}}
	if err := env.Client.Create(t.Context(), ns); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
}

// warnings collects the API server's warnings.
type warnings struct {
	mu   sync.Mutex
	list []string
}

func (w *warnings) HandleWarningHeader(_ int, _ string, text string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.list = append(w.list, text)
}

// dryRun creates every object with a dry run and strict field validation,
// as "kubectl apply --dry-run=server" checks a file, and fails on an error
// or a warning.
func dryRun(t *testing.T, objs []*unstructured.Unstructured) {
	t.Helper()
	w := &warnings{}
	cfg := rest.CopyConfig(env.Config)
	cfg.WarningHandler = w
	c, err := client.New(cfg, client.Options{Scheme: env.Client.Scheme()})
	if err != nil {
		t.Fatal(err)
	}
	for _, o := range objs {
		w.list = nil
		if err := c.Create(t.Context(), o.DeepCopy(), client.DryRunAll, client.FieldValidation(metav1.FieldValidationStrict)); err != nil {
			t.Errorf("%s %s/%s: %v", o.GetKind(), o.GetNamespace(), o.GetName(), err)
		}
		for _, msg := range w.list {
			t.Errorf("%s %s/%s: the API server warns: %s", o.GetKind(), o.GetNamespace(), o.GetName(), msg)
		}
	}
}

// TestReleaseMonitoring checks monitoring.yaml against the Prometheus
// Operator's CRDs and against install.yaml: every object passes a dry run
// with strict field validation; the ServiceMonitor authenticates with the
// token of a Secret of the file, of a ServiceAccount bound to the
// metrics-reader ClusterRole of install.yaml, and verifies the manager's
// certificate with the CA of the operator's Secret under the name of the
// metrics Service of install.yaml, without the deprecated bearerTokenFile
// and without insecureSkipVerify.
func TestReleaseMonitoring(t *testing.T) {
	installMonitoringCRDs(t)
	ensureNamespace(t)
	objs := objects(t, "monitoring.yaml")
	dryRun(t, objs)
	kinds := map[string]int{}
	for _, o := range objs {
		kinds[o.GetKind()]++
		if o.GetNamespace() != installNamespace && o.GetKind() != "ClusterRoleBinding" {
			t.Errorf("%s %s is in namespace %q", o.GetKind(), o.GetName(), o.GetNamespace())
		}
	}
	if kinds["ServiceMonitor"] != 1 || kinds["PrometheusRule"] != 1 {
		t.Errorf("monitoring.yaml holds %v", kinds)
	}

	ep := endpoint(t)
	for _, deprecated := range [][]string{{"bearerTokenFile"}, {"bearerTokenSecret"}, {"tlsConfig", "insecureSkipVerify"}, {"tlsConfig", "caFile"}} {
		if _, found, _ := unstructured.NestedFieldNoCopy(ep.Object, deprecated...); found {
			t.Errorf("the ServiceMonitor's endpoint sets %s", strings.Join(deprecated, "."))
		}
	}
	if got := str(t, ep, "authorization", "type"); got != "Bearer" {
		t.Errorf("authorization.type %q, want Bearer", got)
	}
	tokenSecret := str(t, ep, "authorization", "credentials", "name")
	if key := str(t, ep, "authorization", "credentials", "key"); key != "token" {
		t.Errorf("authorization.credentials.key %q, want token (the key the token controller fills)", key)
	}
	secret := named(objs, "Secret", tokenSecret)
	if secret == nil {
		t.Fatalf("monitoring.yaml has no Secret %s, which the ServiceMonitor's authorization names", tokenSecret)
	}
	sa := secret.GetAnnotations()[corev1.ServiceAccountNameKey]
	if str(t, secret, "type") != string(corev1.SecretTypeServiceAccountToken) || sa == "" {
		t.Errorf("Secret %s: type %q for ServiceAccount %q, want a ServiceAccount token", tokenSecret, str(t, secret, "type"), sa)
	}
	if named(objs, "ServiceAccount", sa) == nil {
		t.Errorf("monitoring.yaml has no ServiceAccount %s", sa)
	}
	crb := find(t, objs, "ClusterRoleBinding")
	role := str(t, crb, "roleRef", "name")
	subjects, _, _ := unstructured.NestedSlice(crb.Object, "subjects")
	if len(subjects) != 1 || subjects[0].(map[string]any)["name"] != sa || subjects[0].(map[string]any)["namespace"] != installNamespace {
		t.Errorf("ClusterRoleBinding %s binds %v, want the ServiceAccount %s/%s", crb.GetName(), subjects, installNamespace, sa)
	}
	install := objects(t, "install.yaml")
	if named(install, "ClusterRole", role) == nil {
		t.Errorf("install.yaml has no ClusterRole %s, which monitoring.yaml binds", role)
	}

	if got := str(t, ep, "tlsConfig", "ca", "secret", "name"); got != metricsCertSecret || str(t, ep, "tlsConfig", "ca", "secret", "key") != "ca.crt" {
		t.Errorf("tlsConfig.ca.secret %s/%s, want %s/ca.crt", got, str(t, ep, "tlsConfig", "ca", "secret", "key"), metricsCertSecret)
	}
	svc := find(t, install, "Service")
	if want := svc.GetName() + "." + svc.GetNamespace() + ".svc"; str(t, ep, "tlsConfig", "serverName") != want {
		t.Errorf("tlsConfig.serverName %q, want %q, the metrics Service's name", str(t, ep, "tlsConfig", "serverName"), want)
	}
}

// documentedKustomization is the kustomization docs/install.md writes
// beside install.yaml and metrics-cert-patch.yaml.
func documentedKustomization(t *testing.T) string {
	t.Helper()
	root, err := kubeenv.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(filepath.Join(root, "docs", "install.md"))
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`(?s)\ncat > kustomization\.yaml <<'EOF'\n(.*?\n)EOF\n`).FindSubmatch(b)
	if m == nil || !strings.Contains(string(m[1]), "metrics-cert-patch.yaml") {
		t.Fatal("docs/install.md writes no kustomization with metrics-cert-patch.yaml")
	}
	return string(m[1])
}

// renderWithMetricsCert renders install.yaml with metrics-cert-patch.yaml
// as docs/install.md does, with the pinned kustomize, and returns the
// objects.
func renderWithMetricsCert(t *testing.T) []*unstructured.Unstructured {
	t.Helper()
	root, err := kubeenv.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	for _, name := range []string{"install.yaml", "metrics-cert-patch.yaml"} {
		b, err := os.ReadFile(filepath.Join(distDir(t), name))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, name), b, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(filepath.Join(dir, "kustomization.yaml"), []byte(documentedKustomization(t)), 0o600); err != nil {
		t.Fatal(err)
	}
	cmd := exec.CommandContext(t.Context(), "go", "tool", "-modfile="+filepath.Join(root, "hack", "pins", "kustomize", "go.mod"), "kustomize", "build", dir)
	cmd.Env = append(os.Environ(), "GOWORK=off")
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("kustomize build: %v", err)
	}
	rendered := filepath.Join(dir, "rendered.yaml")
	if err := os.WriteFile(rendered, out, 0o600); err != nil {
		t.Fatal(err)
	}
	objs, err := kubeenv.ReadObjects(rendered)
	if err != nil {
		t.Fatal(err)
	}
	return objs
}

// metricsCertDir checks the manager's Deployment of install.yaml patched
// as docs/install.md says: it mounts the operator's Secret, and only that,
// and serves its metrics with the certificate there; every other object is
// install.yaml's. It returns the folder the manager reads.
func metricsCertDir(t *testing.T) string {
	t.Helper()
	objs := renderWithMetricsCert(t)
	install := objects(t, "install.yaml")
	if len(objs) != len(install) {
		t.Fatalf("the patched install has %d objects, install.yaml %d", len(objs), len(install))
	}
	var d *unstructured.Unstructured
	for i, o := range objs {
		if o.GetKind() == "Deployment" {
			d = o
		} else if !reflect.DeepEqual(o.Object, install[i].Object) {
			t.Errorf("the patch changes %s %s, or the order of the objects", o.GetKind(), o.GetName())
		}
	}
	if d == nil {
		t.Fatal("the patched install has no Deployment")
	}
	spec := d.Object["spec"].(map[string]any)["template"].(map[string]any)["spec"].(map[string]any)
	volumes, _ := spec["volumes"].([]any)
	containers := spec["containers"].([]any)
	c := containers[0].(map[string]any)
	mounts, _ := c["volumeMounts"].([]any)
	if len(volumes) != 1 || len(mounts) != 1 {
		t.Fatalf("the patched Deployment has volumes %v and mounts %v, want the metrics certificate alone", volumes, mounts)
	}
	v, m := volumes[0].(map[string]any), mounts[0].(map[string]any)
	secret, _ := v["secret"].(map[string]any)
	if secret == nil || secret["secretName"] != metricsCertSecret || m["name"] != v["name"] || m["readOnly"] != true {
		t.Fatalf("the patched Deployment mounts %v from %v, want the Secret %s read-only", m, v, metricsCertSecret)
	}
	dir := m["mountPath"].(string)
	args := c["args"].([]any)
	if !slices.Contains(args, any("--metrics-cert-dir="+dir)) {
		t.Fatalf("the patched manager runs with %v, want --metrics-cert-dir=%s", args, dir)
	}
	ensureNamespace(t)
	dryRun(t, []*unstructured.Unstructured{d})
	return dir
}

// TestReleaseMetricsCertPatch renders install.yaml with the patch as
// docs/install.md does and checks the manager's Deployment (metricsCertDir).
func TestReleaseMetricsCertPatch(t *testing.T) {
	if dir := metricsCertDir(t); !filepath.IsAbs(dir) {
		t.Errorf("--metrics-cert-dir=%s is not absolute", dir)
	}
}

// servingCert writes into dir, as the operator's Secret holds them,
// tls.crt and tls.key, a serving certificate for serverName signed by a CA
// of its own, and returns the CA.
func servingCert(t *testing.T, dir, serverName string) *x509.CertPool {
	t.Helper()
	caKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	caTemplate := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "initlock test CA"},
		NotBefore: now.Add(-time.Hour), NotAfter: now.Add(time.Hour), IsCA: true, BasicConstraintsValid: true,
		KeyUsage: x509.KeyUsageCertSign}
	caDER, err := x509.CreateCertificate(rand.Reader, caTemplate, caTemplate, &caKey.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	ca, err := x509.ParseCertificate(caDER)
	if err != nil {
		t.Fatal(err)
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	leaf := &x509.Certificate{SerialNumber: big.NewInt(2), Subject: pkix.Name{CommonName: serverName}, DNSNames: []string{serverName},
		NotBefore: now.Add(-time.Hour), NotAfter: now.Add(time.Hour), KeyUsage: x509.KeyUsageDigitalSignature,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}}
	der, err := x509.CreateCertificate(rand.Reader, leaf, ca, &key.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	keyDER, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	for name, block := range map[string]*pem.Block{"tls.crt": {Type: "CERTIFICATE", Bytes: der}, "tls.key": {Type: "EC PRIVATE KEY", Bytes: keyDER}} {
		// Readable by the image's user, as a Secret volume's files are.
		if err := os.WriteFile(filepath.Join(dir, name), pem.EncodeToMemory(block), 0o644); err != nil { //nolint:gosec // read by the image's user
			t.Fatal(err)
		}
	}
	pool := x509.NewCertPool()
	pool.AddCert(ca)
	return pool
}

// scraper is how the ServiceMonitor of monitoring.yaml scrapes the
// manager: its CA and server name, and the token of its ServiceAccount.
type scraper struct {
	tls   *tls.Config
	token string
}

// monitoringScraper sets up, in namespace ns, what monitoring.yaml sets up
// in initlock-system for the scrape: its ServiceAccount, bound by its
// ClusterRoleBinding to the ClusterRole of install.yaml. The token comes
// from the TokenRequest API: the token controller that fills the Secret of
// monitoring.yaml in a real cluster does not run here.
func monitoringScraper(t *testing.T, ns string, ca *x509.CertPool) scraper {
	t.Helper()
	ep := endpoint(t)
	objs := objects(t, "monitoring.yaml")
	crb := find(t, objs, "ClusterRoleBinding")
	sa := find(t, objs, "ServiceAccount")
	clusterRole := named(objects(t, "install.yaml"), "ClusterRole", str(t, crb, "roleRef", "name"))
	if clusterRole == nil {
		t.Fatalf("install.yaml has no ClusterRole %s", str(t, crb, "roleRef", "name"))
	}
	if err := env.Client.Create(t.Context(), clusterRole.DeepCopy()); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
	crb = crb.DeepCopy()
	crb.SetName(crb.GetName() + "-" + ns)
	if err := unstructured.SetNestedSlice(crb.Object, []any{map[string]any{"kind": "ServiceAccount", "name": sa.GetName(), "namespace": ns}}, "subjects"); err != nil {
		t.Fatal(err)
	}
	if err := env.Client.Create(t.Context(), crb); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = env.Client.Delete(context.WithoutCancel(t.Context()), crb) })
	return scraper{
		tls:   &tls.Config{RootCAs: ca, ServerName: str(t, ep, "tlsConfig", "serverName"), MinVersion: tls.VersionTLS12},
		token: env.ServiceAccountToken(t, ns, sa.GetName()),
	}
}
