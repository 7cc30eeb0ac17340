package hardened_test

import (
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"github.com/prometheus/client_golang/prometheus"
	velerov1 "github.com/vmware-tanzu/velero/pkg/apis/velero/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/initlock/initlock/internal/kubeenv"
	"github.com/initlock/initlock/internal/relink"
	"github.com/initlock/initlock/pkg/initlock/capi"
	"github.com/initlock/initlock/test/managertest"
)

var env *kubeenv.Env

func TestMain(m *testing.M) {
	kubeenv.Main(m, kubeenv.Options{OwnerReferencesPermissionEnforcement: true}, &env)
}

// installRules are the manager's rules on such a cluster: the generated
// ClusterRole of config/rbac and the opt-in one of
// config/owner-references-enforcement.
func installRules(t *testing.T) []rbacv1.PolicyRule {
	t.Helper()
	return append(kubeenv.GeneratedClusterRoleRules(t, "rbac"), kubeenv.GeneratedClusterRoleRules(t, "owner-references-enforcement")...)
}

// restrictedUser binds rules to a new user named after the namespace and
// returns its rest.Config once the authorizer applies the binding.
func restrictedUser(t *testing.T, ns string, rules []rbacv1.PolicyRule) *rest.Config {
	t.Helper()
	user := "initlock-" + ns
	env.BindClusterRole(t, user, rules, kubeenv.UserSubject(user))
	cfg, err := env.AddUser(user, nil)
	if err != nil {
		t.Fatal(err)
	}
	// RBAC applies once the authorizer's cache has seen the binding.
	c, l := newClient(t, cfg), &metav1.PartialObjectMetadataList{}
	l.SetGroupVersionKind(capiGVK("MachineList"))
	kubeenv.Eventually(t, 10*time.Second, func() error { return c.List(t.Context(), l, client.InNamespace(ns)) })
	return cfg
}

func newClient(t *testing.T, cfg *rest.Config) client.Client {
	t.Helper()
	c, err := client.New(cfg, client.Options{Scheme: env.Client.Scheme()})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// startManager runs the manager with the relinker (default kinds, its own
// metrics registry, warnings at once) in ns as cfg.
func startManager(t *testing.T, cfg *rest.Config, ns string) (*kubeenv.Running, *prometheus.Registry) {
	t.Helper()
	reg := prometheus.NewRegistry()
	opts := managertest.Options(ns)
	opts.Logger = logr.Discard()
	opts.Setups = append(opts.Setups, relink.ManagerSetup(relink.Options{
		Namespace: ns, Registry: reg, WarnAfter: -1, MinBackoff: 200 * time.Millisecond, MaxBackoff: time.Second,
	}))
	return managertest.Start(t, cfg, opts), reg
}

func capiGVK(kind string) schema.GroupVersionKind {
	return schema.GroupVersionKind{Group: capi.Group, Version: env.CAPIVersion, Kind: kind}
}

// restoreName is the restore the objects of the tests come back with.
const restoreName = "restore-1"

// restored returns u as a restore with initlock's Velero plugin leaves it:
// no ownerReferences, the owners recorded in the annotation, labelled with
// the restore.
func restored(u *unstructured.Unstructured, owners ...relink.OwnerRef) *unstructured.Unstructured {
	u.SetAnnotations(map[string]string{relink.Annotation: relink.Encode(owners)})
	return withRestore(u)
}

// restoredGraph is the MachineDeployment md-0 of Cluster c1, its
// MachineSet md-0-abc and their Machine md-0-abc-0, as restored.
func restoredGraph(ns string) []client.Object {
	v := env.CAPIVersion
	return []client.Object{
		restored(kubeenv.NewMachineGroup("MachineDeployment", v, ns, "c1", "md-0"), plainOwner("Cluster", "c1")),
		restored(kubeenv.NewMachineGroup("MachineSet", v, ns, "c1", "md-0-abc"), controllerOwner("MachineDeployment", "md-0")),
		restored(kubeenv.NewMachine(v, ns, "c1", "md-0-abc-0"), controllerOwner("MachineSet", "md-0-abc")),
	}
}

// restoredCluster creates Cluster name as the same restore brings it back,
// which the relinker's link rule proves to be the objects' owner.
func restoredCluster(t *testing.T, ns, name string) *unstructured.Unstructured {
	t.Helper()
	return managertest.CreateCluster(t, env.Client, env.CAPIVersion, ns, name, func(u *unstructured.Unstructured) { withRestore(u) })
}

func withRestore(u *unstructured.Unstructured) *unstructured.Unstructured {
	labels := u.GetLabels()
	if labels == nil {
		labels = map[string]string{}
	}
	labels[velerov1.RestoreNameLabel] = restoreName
	u.SetLabels(labels)
	return u
}

// controllerOwner is a controller reference with blockOwnerDeletion, as
// Cluster API's controllers write them.
func controllerOwner(kind, name string) relink.OwnerRef {
	return relink.OwnerRef{APIVersion: capi.Group + "/" + env.CAPIVersion, Kind: kind, Name: name,
		Controller: ptr.To(true), BlockOwnerDeletion: ptr.To(true)}
}

// plainOwner is a reference without controller or blockOwnerDeletion.
func plainOwner(kind, name string) relink.OwnerRef {
	return relink.OwnerRef{APIVersion: capi.Group + "/" + env.CAPIVersion, Kind: kind, Name: name}
}

func create(t *testing.T, objs ...client.Object) {
	t.Helper()
	managertest.Create(t, env.Client, objs...)
}

func get(t *testing.T, kind, ns, name string) *unstructured.Unstructured {
	t.Helper()
	u := &unstructured.Unstructured{}
	u.SetGroupVersionKind(capiGVK(kind))
	if err := env.Client.Get(t.Context(), client.ObjectKey{Namespace: ns, Name: name}, u); err != nil {
		t.Fatalf("reading %s %s/%s: %v", kind, ns, name, err)
	}
	return u
}

// linkedTo returns nil once the object has the annotation removed and
// exactly one ownerReference, to owner, shaped as ref.
func linkedTo(t *testing.T, kind, ns, name string, owner *unstructured.Unstructured, ref relink.OwnerRef) func() error {
	return func() error {
		u := get(t, kind, ns, name)
		if v, ok := u.GetAnnotations()[relink.Annotation]; ok {
			return fmt.Errorf("%s %s still has the annotation %s", kind, name, v)
		}
		want := metav1.OwnerReference{APIVersion: owner.GetAPIVersion(), Kind: owner.GetKind(), Name: owner.GetName(),
			UID: owner.GetUID(), Controller: ref.Controller, BlockOwnerDeletion: ref.BlockOwnerDeletion}
		got := u.GetOwnerReferences()
		if !slices.EqualFunc(got, []metav1.OwnerReference{want}, equalRef) {
			return fmt.Errorf("%s %s ownerReferences = %v, want %v", kind, name, got, want)
		}
		return nil
	}
}

func equalRef(a, b metav1.OwnerReference) bool {
	return a.APIVersion == b.APIVersion && a.Kind == b.Kind && a.Name == b.Name && a.UID == b.UID &&
		ptr.Equal(a.Controller, b.Controller) && ptr.Equal(a.BlockOwnerDeletion, b.BlockOwnerDeletion)
}
