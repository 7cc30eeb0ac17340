package velero_test

import (
	"context"
	"fmt"
	"testing"

	"github.com/sirupsen/logrus"
	veleroplugin "github.com/vmware-tanzu/velero/pkg/plugin/velero"
	riav2 "github.com/vmware-tanzu/velero/pkg/plugin/velero/restoreitemaction/v2"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	corev1client "k8s.io/client-go/kubernetes/typed/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/initlock/initlock/internal/kubeenv"
	"github.com/initlock/initlock/internal/kubeenv/apimodel"
	"github.com/initlock/initlock/internal/velero"
	velerosuite "github.com/initlock/initlock/test/velero"
)

// The plugin's cases (test/velero) against the model API server: no
// control plane. The same cases run against the real API server there,
// where the plugin binary is also loaded as Velero loads it. The settings
// read from the deprecated variables (ConfigFromEnv) are among the cases
// of Settings.

func model() velerosuite.Backend {
	return velerosuite.Backend{
		New: func(t *testing.T) velerosuite.API {
			t.Helper()
			counter := &kubeenv.Counter{}
			c := &apimodel.Client{Store: apimodel.NewStore(), Gate: apimodel.Counting{Counter: counter}, Actor: "velero"}
			n := 0
			return velerosuite.API{
				Client:  c,
				Counter: counter,
				Namespace: func() string {
					n++
					return fmt.Sprintf("%s-%d", kubeenv.NamespaceName(t.Name()), n)
				},
				ConfigMaps: func(ns string) corev1client.ConfigMapInterface { return configMaps{c: c, ns: ns} },
			}
		},
	}
}

// configMaps is the typed client of the ConfigMaps of one namespace of the
// model, as velero.Settings reads them: List alone is served, through the
// model's client.
type configMaps struct {
	corev1client.ConfigMapInterface
	c  client.Client
	ns string
}

func (m configMaps) List(ctx context.Context, opts metav1.ListOptions) (*corev1.ConfigMapList, error) {
	sel, err := labels.Parse(opts.LabelSelector)
	if err != nil {
		return nil, fmt.Errorf("label selector %q: %w", opts.LabelSelector, err)
	}
	list := &corev1.ConfigMapList{}
	if err := m.c.List(ctx, list, client.InNamespace(m.ns), client.MatchingLabelsSelector{Selector: sel}); err != nil {
		return nil, err
	}
	return list, nil
}

func TestExecute(t *testing.T) { velerosuite.Execute(t, model()) }

func TestSettings(t *testing.T) { velerosuite.Settings(t, model()) }

// The action outside Execute, and Execute without an item.

func TestExecuteWithoutItems(t *testing.T) {
	a := velero.NewAction(velero.DefaultConfig(), false, nil)
	for _, in := range []*veleroplugin.RestoreItemActionExecuteInput{nil, {}, {Item: &unstructured.Unstructured{}}} {
		if _, err := a.Execute(in); err == nil {
			t.Errorf("Execute(%+v) succeeded, want an error", in)
		}
	}
}

func TestActionIsSynchronous(t *testing.T) {
	a := velero.NewAction(velero.DefaultConfig(), false, nil)
	if _, err := a.Progress("x", velerosuite.RestoreObject("ns")); err == nil || err.Error() != riav2.AsyncOperationsNotSupportedError().Error() {
		t.Errorf("Progress error = %v", err)
	}
	if err := a.Cancel("x", velerosuite.RestoreObject("ns")); err != nil {
		t.Errorf("Cancel = %v", err)
	}
	if ok, err := a.AreAdditionalItemsReady(nil, velerosuite.RestoreObject("ns")); !ok || err != nil {
		t.Errorf("AreAdditionalItemsReady = %v, %v", ok, err)
	}
	if a.Name() != velero.ActionName || velero.NewAction(velero.DefaultConfig(), true, logrus.New()).Name() != velero.LabelledActionName {
		t.Errorf("names = %s", a.Name())
	}
}
