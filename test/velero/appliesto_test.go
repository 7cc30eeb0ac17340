package velerosuite_test

import (
	"io"
	"testing"

	"github.com/sirupsen/logrus"
	velerodiscovery "github.com/vmware-tanzu/velero/pkg/discovery"
	"github.com/vmware-tanzu/velero/pkg/plugin/framework"
	riav2 "github.com/vmware-tanzu/velero/pkg/plugin/velero/restoreitemaction/v2"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/discovery"

	"github.com/initlock/initlock/internal/velero"
	"github.com/initlock/initlock/pkg/initlock/capi"
)

func quietLogger() *logrus.Logger {
	l := logrus.New()
	l.SetOutput(io.Discard)
	return l
}

// resolve resolves the actions the way Velero's restore does, against the
// API server's discovery, and returns the names of those that apply.
func resolve(t *testing.T, cfg velero.Config) func(gr schema.GroupResource, ns string, labels map[string]string) []string {
	t.Helper()
	dc, err := discovery.NewDiscoveryClientForConfig(env.Config)
	if err != nil {
		t.Fatal(err)
	}
	helper, err := velerodiscovery.NewHelper(dc, quietLogger())
	if err != nil {
		t.Fatalf("velero discovery helper: %v", err)
	}
	actions := []riav2.RestoreItemAction{velero.NewAction(cfg, false, nil), velero.NewAction(cfg, true, nil)}
	resolved, err := framework.NewRestoreItemActionResolverV2(actions).ResolveActions(helper, quietLogger())
	if err != nil {
		t.Fatalf("resolving the actions: %v", err)
	}
	return func(gr schema.GroupResource, ns string, labels map[string]string) []string {
		var names []string
		for _, a := range resolved {
			if a.ShouldUse(gr, ns, &metav1.ObjectMeta{Namespace: ns, Labels: labels}, quietLogger()) {
				names = append(names, a.Name())
			}
		}
		return names
	}
}

func TestAppliesToAsVeleroResolvesIt(t *testing.T) {
	labelled := map[string]string{capi.ClusterNameLabel: "c1"}
	other := map[string]string{"app": "x"}
	tests := []struct {
		name   string
		cfg    velero.Config
		gr     schema.GroupResource
		labels map[string]string
		want   []string
	}{
		{"machines", velero.DefaultConfig(), schema.GroupResource{Group: capi.Group, Resource: "machines"}, nil, []string{velero.ActionName}},
		{"clusters", velero.DefaultConfig(), schema.GroupResource{Group: capi.Group, Resource: "clusters"}, other, []string{velero.ActionName}},
		{"another Cluster API group", velero.DefaultConfig(), schema.GroupResource{Group: "ipam.cluster.x-k8s.io", Resource: "ipaddresses"}, nil, []string{velero.ActionName}},
		{"infrastructure group not installed", velero.DefaultConfig(), schema.GroupResource{Group: "infrastructure.cluster.x-k8s.io", Resource: "dockermachines"}, nil, []string{velero.ActionName}},
		{"labelled configmap", velero.DefaultConfig(), schema.GroupResource{Resource: "configmaps"}, labelled, []string{velero.LabelledActionName}},
		{"labelled secret", velero.DefaultConfig(), schema.GroupResource{Resource: "secrets"}, labelled, []string{velero.LabelledActionName}},
		{"unlabelled configmap", velero.DefaultConfig(), schema.GroupResource{Resource: "configmaps"}, other, nil},
		{"labelled pod", velero.DefaultConfig(), schema.GroupResource{Resource: "pods"}, labelled, nil},
		{"group that only ends like Cluster API's", velero.DefaultConfig(), schema.GroupResource{Group: "notcluster.x-k8s.io.example.com", Resource: "things"}, nil, nil},
		{
			"configured: only machines, and services by label",
			velero.Config{Resources: []string{"machines.cluster.x-k8s.io"}, LabelledResources: []string{"services"}, LabelSelector: "app=x"},
			schema.GroupResource{Resource: "services"}, other, []string{velero.LabelledActionName},
		},
		{
			"configured: clusters no longer taken",
			velero.Config{Resources: []string{"machines.cluster.x-k8s.io"}, LabelSelector: "app=x"},
			schema.GroupResource{Group: capi.Group, Resource: "clusters"}, other, nil,
		},
		{
			"configured: no labelled resources takes none",
			velero.Config{Resources: []string{"machines.cluster.x-k8s.io"}, LabelSelector: "app=x"},
			schema.GroupResource{Resource: "configmaps"}, other, nil,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := resolve(t, tt.cfg)(tt.gr, "ns1", tt.labels)
			if len(got) != len(tt.want) || (len(got) > 0 && got[0] != tt.want[0]) {
				t.Fatalf("actions for %s %v = %v, want %v", tt.gr, tt.labels, got, tt.want)
			}
		})
	}
}
