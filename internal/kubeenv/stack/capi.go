package stack

import (
	"cmp"
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"path/filepath"
	"strconv"
	"strings"

	dto "github.com/prometheus/client_model/go"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/initlock/initlock/internal/kubeenv"
)

// capiManager is a Cluster API manager process with its webhook server.
type capiManager struct {
	*Proc
	// webhookPort is the port of its webhook server on 127.0.0.1.
	webhookPort int
	// diagnostics serves its metrics over plain HTTP.
	diagnostics string
	// manifests is its config/webhook/manifests.yaml in the module.
	manifests string
	// prefix is put before the names of its webhook configurations.
	prefix string
}

// startCAPIManager starts bin as user name, its webhook server on a free
// port with the certificate in certDir, with extraArgs added to its
// command line, and waits until it is ready.
func (m *Mgmt) startCAPIManager(ctx context.Context, name, bin, certDir string, extraArgs ...string) (*capiManager, error) {
	kubeconfig, err := m.Env.WriteKubeconfig(name, []string{"system:masters"})
	if err != nil {
		return nil, err
	}
	addrs, err := freeAddrs(3)
	if err != nil {
		return nil, err
	}
	_, port, _ := strings.Cut(addrs[0], ":")
	webhookPort, err := strconv.Atoi(port)
	if err != nil {
		return nil, err
	}
	p, err := m.startReady(ctx, name, bin, addrs[1], append([]string{
		"--kubeconfig=" + kubeconfig,
		"--leader-elect=false",
		"--webhook-cert-dir=" + certDir,
		"--webhook-port=" + port,
		"--health-addr=" + addrs[1],
		"--diagnostics-address=" + addrs[2],
		"--insecure-diagnostics",
	}, extraArgs...))
	if err != nil {
		return nil, err
	}
	return &capiManager{Proc: p, webhookPort: webhookPort, diagnostics: addrs[2]}, nil
}

// startCAPI starts CABPK (the stack's, unmodified, unless Options.CABPK
// names another) and the core manager.
func (m *Mgmt) startCAPI(ctx context.Context) error {
	capiDir, err := kubeenv.ModuleDir("hack/capi", capiModule)
	if err != nil {
		return err
	}
	certDir := filepath.Join(m.Dir, "webhook-certs")
	if m.caBundle, err = writeServingCert(certDir); err != nil {
		return err
	}
	if m.cabpk, err = m.startCAPIManager(ctx, "capi-kubeadm-bootstrap-manager", cmp.Or(m.opts.CABPK, m.bins.path(BinCABPK)), certDir, m.opts.CABPKArgs...); err != nil {
		return err
	}
	m.cabpk.manifests = filepath.Join(capiDir, "bootstrap", "kubeadm", "config", "webhook", "manifests.yaml")
	m.cabpk.prefix = "capi-kubeadm-bootstrap-"
	if m.core, err = m.startCAPIManager(ctx, "capi-manager", m.bins.path(BinCore), certDir); err != nil {
		return err
	}
	m.core.manifests = filepath.Join(capiDir, "core", "config", "webhook", "manifests.yaml")
	m.core.prefix = "capi-"
	return nil
}

// WebhookConfigurations returns the webhook configurations of CAPI core and
// CABPK as their modules ship them in config/webhook, pointed at the
// managers' local webhook servers: each service reference becomes the URL
// https://127.0.0.1:port/path, with the stack's CA as caBundle, and each
// configuration's name gets its manager's prefix, as kustomize gives it.
func (m *Mgmt) WebhookConfigurations() ([]*unstructured.Unstructured, error) {
	if m.core == nil || m.cabpk == nil {
		return nil, errors.New("cluster API is not running in this management cluster")
	}
	var out []*unstructured.Unstructured
	for _, mgr := range []*capiManager{m.core, m.cabpk} {
		objs, err := kubeenv.ReadObjects(mgr.manifests)
		if err != nil {
			return nil, fmt.Errorf("reading webhook manifests: %w", err)
		}
		for _, u := range objs {
			u.SetName(mgr.prefix + u.GetName())
			hooks, _, _ := unstructured.NestedSlice(u.Object, "webhooks")
			for i, h := range hooks {
				hook := h.(map[string]any)
				path, _, _ := unstructured.NestedString(hook, "clientConfig", "service", "path")
				hook["clientConfig"] = map[string]any{
					"url":      fmt.Sprintf("https://127.0.0.1:%d%s", mgr.webhookPort, path),
					"caBundle": base64.StdEncoding.EncodeToString(m.caBundle),
				}
				hooks[i] = hook
			}
			if err := unstructured.SetNestedSlice(u.Object, hooks, "webhooks"); err != nil {
				return nil, err
			}
			out = append(out, u)
		}
	}
	return out, nil
}

// RegisterWebhooks creates the webhook configurations: from then on, every
// write to a Cluster API object goes through the managers' webhooks.
func (m *Mgmt) RegisterWebhooks(ctx context.Context) error {
	cfgs, err := m.WebhookConfigurations()
	if err != nil {
		return err
	}
	for _, u := range cfgs {
		if err := m.Client.Create(ctx, u); err != nil && !apierrors.IsAlreadyExists(err) {
			return fmt.Errorf("registering %s %s: %w", u.GetKind(), u.GetName(), err)
		}
	}
	m.webhooks = true
	return nil
}

// UnregisterWebhooks deletes the webhook configurations.
func (m *Mgmt) UnregisterWebhooks(ctx context.Context) error {
	cfgs, err := m.WebhookConfigurations()
	if err != nil {
		return err
	}
	for _, u := range cfgs {
		if err := m.Client.Delete(ctx, u); err != nil && !apierrors.IsNotFound(err) {
			return fmt.Errorf("deleting %s %s: %w", u.GetKind(), u.GetName(), err)
		}
	}
	m.webhooks = false
	return nil
}

// WebhookRequests returns how many admission requests the webhook servers
// of core and CABPK have answered, by webhook path and HTTP code (e.g.
// "/validate-cluster-x-k8s-io-v1beta2-cluster 200"), from their metrics.
func (m *Mgmt) WebhookRequests(ctx context.Context) (map[string]float64, error) {
	out := map[string]float64{}
	for _, mgr := range []*capiManager{m.core, m.cabpk} {
		if mgr == nil {
			continue
		}
		body, err := httpGet(ctx, "http://"+mgr.diagnostics+"/metrics")
		if err != nil {
			return nil, fmt.Errorf("reading the metrics of %s: %w", mgr.Name, err)
		}
		metrics, err := kubeenv.ParseMetrics(strings.NewReader(body))
		if err != nil {
			return nil, fmt.Errorf("the metrics of %s: %w", mgr.Name, err)
		}
		metrics.Each("controller_runtime_webhook_requests_total", func(l map[string]string, s *dto.Metric) {
			out[l["webhook"]+" "+l["code"]] += s.GetCounter().GetValue()
		})
	}
	return out, nil
}
