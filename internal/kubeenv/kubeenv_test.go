package kubeenv_test

import (
	"errors"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/initlock/initlock/internal/kubeenv"
	"github.com/initlock/initlock/pkg/initlock/capi"
)

var env *kubeenv.Env

func TestMain(m *testing.M) { kubeenv.Main(m, kubeenv.Options{}, &env) }

func TestGarbageCollectorDeletesDependents(t *testing.T) {
	ctx := t.Context()
	ns := env.Namespace(t)

	cluster := kubeenv.NewCluster(capi.V1Beta2, ns, "c1")
	if err := env.Client.Create(ctx, cluster); err != nil {
		t.Fatalf("creating cluster: %v", err)
	}
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{
		Namespace: ns, Name: "c1-dependent",
		OwnerReferences: []metav1.OwnerReference{{
			APIVersion: cluster.GetAPIVersion(), Kind: "Cluster", Name: "c1", UID: cluster.GetUID(),
		}},
	}}
	if err := env.Client.Create(ctx, cm); err != nil {
		t.Fatalf("creating configmap: %v", err)
	}
	if err := env.Client.Delete(ctx, cluster); err != nil {
		t.Fatalf("deleting cluster: %v", err)
	}
	kubeenv.Eventually(t, 10*time.Second, func() error {
		err := env.Client.Get(ctx, client.ObjectKeyFromObject(cm), &corev1.ConfigMap{})
		if apierrors.IsNotFound(err) {
			return nil
		}
		if err != nil {
			return err
		}
		return errors.New("configmap still exists")
	})
}

func TestNamespaceDeletionCompletes(t *testing.T) {
	ctx := t.Context()
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: kubeenv.NamespaceName(t.Name())}}
	if err := env.Client.Create(ctx, ns); err != nil {
		t.Fatalf("creating namespace: %v", err)
	}
	machine := kubeenv.NewMachine(capi.V1Beta2, ns.Name, "c1", "m1")
	if err := env.Client.Create(ctx, machine); err != nil {
		t.Fatalf("creating machine: %v", err)
	}
	if err := env.Client.Delete(ctx, ns); err != nil {
		t.Fatalf("deleting namespace: %v", err)
	}
	kubeenv.WaitGone(t, env.Client, ns)
}

func TestClusterAPIVersionsServed(t *testing.T) {
	dc := env.Discovery(t)
	got, err := capi.Discover(dc)
	if err != nil {
		t.Fatal(err)
	}
	if got != capi.V1Beta2 {
		t.Fatalf("preferred Cluster API version = %q, want %q", got, capi.V1Beta2)
	}
}

func TestNamespaceName(t *testing.T) {
	for _, in := range []string{"TestX", "Test/With Spaces_and/Sub", "TestAVeryLongNameThatGoesOnAndOnAndOnBeyondAnyReasonableLength"} {
		got := kubeenv.NamespaceName(in)
		if len(got) > 63 {
			t.Errorf("NamespaceName(%q) = %q: longer than 63", in, got)
		}
		if errs := validation.IsDNS1123Label(got); len(errs) > 0 {
			t.Errorf("NamespaceName(%q) = %q: %v", in, got, errs)
		}
	}
}
