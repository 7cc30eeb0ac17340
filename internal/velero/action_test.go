package velero_test

import (
	"slices"
	"testing"

	"github.com/sirupsen/logrus"
	velerov1 "github.com/vmware-tanzu/velero/pkg/apis/velero/v1"
	veleroplugin "github.com/vmware-tanzu/velero/pkg/plugin/velero"
	riav2 "github.com/vmware-tanzu/velero/pkg/plugin/velero/restoreitemaction/v2"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/initlock/initlock/internal/velero"
	"github.com/initlock/initlock/pkg/initlock/capi"
)

// The tests of this file need no API server; the cases with objects, on
// the model API server, are in model_test.go, and the plugin as Velero
// loads it is tested in test/velero.

func restoreObject(ns string) *velerov1.Restore {
	return &velerov1.Restore{
		ObjectMeta: metav1.ObjectMeta{Namespace: "velero", Name: "restore-1"},
		Spec:       velerov1.RestoreSpec{BackupName: "backup-1", IncludedNamespaces: []string{ns}},
	}
}

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
	if _, err := a.Progress("x", restoreObject("ns")); err == nil || err.Error() != riav2.AsyncOperationsNotSupportedError().Error() {
		t.Errorf("Progress error = %v", err)
	}
	if err := a.Cancel("x", restoreObject("ns")); err != nil {
		t.Errorf("Cancel = %v", err)
	}
	if ok, err := a.AreAdditionalItemsReady(nil, restoreObject("ns")); !ok || err != nil {
		t.Errorf("AreAdditionalItemsReady = %v, %v", ok, err)
	}
	if a.Name() != velero.ActionName || velero.NewAction(velero.DefaultConfig(), true, logrus.New()).Name() != velero.LabelledActionName {
		t.Errorf("names = %s", a.Name())
	}
}

func TestConfigFromEnv(t *testing.T) {
	tests := []struct {
		name    string
		env     map[string]string
		want    velero.Config
		wantErr bool
	}{
		{name: "defaults", want: velero.DefaultConfig()},
		{
			name: "all set",
			env: map[string]string{
				velero.EnvResources:         " machines.cluster.x-k8s.io , *.bootstrap.cluster.x-k8s.io,",
				velero.EnvLabelledResources: "configmaps",
				velero.EnvLabelSelector:     "cluster.x-k8s.io/cluster-name in (a,b)",
			},
			want: velero.Config{
				Resources:         []string{"machines.cluster.x-k8s.io", "*.bootstrap.cluster.x-k8s.io"},
				LabelledResources: []string{"configmaps"},
				LabelSelector:     "cluster.x-k8s.io/cluster-name in (a,b)",
			},
		},
		{
			name: "no labelled resources",
			env:  map[string]string{velero.EnvLabelledResources: "-"},
			want: velero.Config{Resources: velero.DefaultConfig().Resources, LabelSelector: capi.ClusterNameLabel},
		},
		{name: "bad selector", env: map[string]string{velero.EnvLabelSelector: "a in (("}, wantErr: true},
		{name: "nothing selected", env: map[string]string{velero.EnvResources: "-", velero.EnvLabelledResources: "-"}, wantErr: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := velero.ConfigFromEnv(func(k string) string { return tt.env[k] })
			if tt.wantErr {
				if err == nil {
					t.Fatalf("ConfigFromEnv = %+v, want an error", got)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(got.Resources, tt.want.Resources) || !slices.Equal(got.LabelledResources, tt.want.LabelledResources) || got.LabelSelector != tt.want.LabelSelector {
				t.Fatalf("ConfigFromEnv = %+v, want %+v", got, tt.want)
			}
		})
	}
}
