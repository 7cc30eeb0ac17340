package manifests_test

import (
	"fmt"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/initlock/initlock/internal/kubeenv"
)

var env *kubeenv.Env

// The manifests need no garbage collector; the Cluster API CRDs are there
// so that the RBAC rules name resources that exist.
func TestMain(m *testing.M) {
	kubeenv.Main(m, kubeenv.Options{NoControllerManager: true}, &env)
}

// render runs make manifests into a temporary file and returns the objects.
func render(t *testing.T, extra ...string) []*unstructured.Unstructured {
	t.Helper()
	root, err := kubeenv.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(t.TempDir(), "install.yaml")
	args := append([]string{"-s", "manifests", "MANIFESTS=" + out}, extra...)
	cmd := exec.Command("make", args...)
	cmd.Dir = root
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("make %s: %v\n%s", strings.Join(args, " "), err, b)
	}
	objs, err := kubeenv.ReadObjects(out)
	if err != nil {
		t.Fatal(err)
	}
	if len(objs) == 0 {
		t.Fatalf("make manifests rendered no object")
	}
	return objs
}

// TestInstallManifestsAreValid applies every object rendered from
// config/default and from the config/relink-secrets overlay with
// server-side apply and dryRun=All, and fails on errors and on warnings.
func TestInstallManifestsAreValid(t *testing.T) {
	t.Run("default", func(t *testing.T) { validateInstall(t, render(t)) })
	t.Run("relink-secrets", func(t *testing.T) { validateInstall(t, render(t, "KUSTOMIZE_DIR=config/relink-secrets")) })
}

// validateInstall applies objs with server-side apply and dryRun=All, in
// their order, and fails on errors and on warnings. The objects selected by
// NamespaceSelector, which must be the Namespaces, are applied for real
// first, as "kubectl apply --server-side -l NamespaceSelector" before a
// "kubectl apply --server-side --dry-run=server" does: a dry-run creation of
// a namespace does not let namespaced objects be validated in it.
func validateInstall(t *testing.T, objs []*unstructured.Unstructured) {
	t.Helper()
	ctx := t.Context()
	sel, err := labels.Parse(NamespaceSelector)
	if err != nil {
		t.Fatal(err)
	}
	for _, o := range objs {
		if sel.Matches(labels.Set(o.GetLabels())) != (o.GetKind() == "Namespace") {
			t.Fatalf("%s %s: the selector %s must select the Namespaces and nothing else", o.GetKind(), o.GetName(), NamespaceSelector)
		}
		if o.GetKind() != "Namespace" {
			continue
		}
		err := env.Client.Apply(ctx, client.ApplyConfigurationFromUnstructured(o.DeepCopy()), client.FieldOwner("initlock-install-test"), client.ForceOwnership)
		if err != nil {
			t.Fatalf("applying namespace %s: %v", o.GetName(), err)
		}
	}
	validate := validator(t)
	kinds := map[string]int{}
	for _, o := range objs {
		kinds[o.GetKind()]++
		validate(o)
	}
	for _, kind := range []string{"Namespace", "ServiceAccount", "ClusterRole", "ClusterRoleBinding", "Role", "RoleBinding", "Deployment", "Service"} {
		if kinds[kind] == 0 {
			t.Errorf("the manifests hold no %s (kinds: %v)", kind, kinds)
		}
	}
	// Dry run: nothing but the namespaces was created.
	for _, o := range objs {
		if o.GetKind() != "Deployment" {
			continue
		}
		err := env.Client.Get(ctx, client.ObjectKeyFromObject(o), &appsv1.Deployment{})
		if !apierrors.IsNotFound(err) {
			t.Errorf("Deployment %s exists after a dry run (err %v)", key(o), err)
		}
	}
}

// validator returns a function that applies an object with server-side
// apply and dryRun=All, and fails on an error or a warning. Warnings count
// as failures: they are how the API server reports, among others, a Pod
// template that breaks the namespace's Pod Security level.
func validator(t *testing.T) func(*unstructured.Unstructured) {
	t.Helper()
	warnings := &warningCollector{}
	cfg := rest.CopyConfig(env.Config)
	cfg.WarningHandler = warnings
	c, err := client.New(cfg, client.Options{Scheme: env.Client.Scheme()})
	if err != nil {
		t.Fatal(err)
	}
	return func(o *unstructured.Unstructured) {
		t.Helper()
		warnings.take()
		err := c.Apply(t.Context(), client.ApplyConfigurationFromUnstructured(o.DeepCopy()),
			client.FieldOwner("initlock-install-test"), client.ForceOwnership, client.DryRunAll)
		if err != nil {
			t.Errorf("%s %s: not valid for kube-apiserver %s: %v", o.GetKind(), key(o), kubeenv.KubeVersion, err)
		}
		for _, w := range warnings.take() {
			t.Errorf("%s %s: kube-apiserver %s warns: %s", o.GetKind(), key(o), kubeenv.KubeVersion, w)
		}
	}
}

// TestInstallManifestsAreConsistent checks what a dry run cannot: that the
// objects refer to each other.
func TestInstallManifestsAreConsistent(t *testing.T) {
	objs := render(t)
	byKind := map[string]map[string]*unstructured.Unstructured{}
	for _, o := range objs {
		if byKind[o.GetKind()] == nil {
			byKind[o.GetKind()] = map[string]*unstructured.Unstructured{}
		}
		byKind[o.GetKind()][key(o)] = o
	}
	has := func(kind, namespace, name string) bool {
		_, ok := byKind[kind][namespace+"/"+name]
		return ok
	}
	// The ServiceAccounts a ClusterRoleBinding binds, as "namespace/name".
	bound := map[string]bool{}
	for _, kind := range []string{"ClusterRoleBinding", "RoleBinding"} {
		for k, o := range byKind[kind] {
			var b rbacv1.RoleBinding
			convert(t, o, &b)
			refNS := ""
			if b.RoleRef.Kind == "Role" {
				refNS = o.GetNamespace()
			}
			if !has(b.RoleRef.Kind, refNS, b.RoleRef.Name) {
				t.Errorf("%s %s refers to %s %s, which the manifests do not hold", kind, k, b.RoleRef.Kind, b.RoleRef.Name)
			}
			for _, s := range b.Subjects {
				if s.Kind == rbacv1.ServiceAccountKind && !has("ServiceAccount", s.Namespace, s.Name) {
					t.Errorf("%s %s binds ServiceAccount %s/%s, which the manifests do not hold", kind, k, s.Namespace, s.Name)
				}
				if kind == "ClusterRoleBinding" && s.Kind == rbacv1.ServiceAccountKind {
					bound[s.Namespace+"/"+s.Name] = true
				}
			}
		}
	}
	for k, o := range byKind["Deployment"] {
		var d appsv1.Deployment
		convert(t, o, &d)
		if sa := d.Spec.Template.Spec.ServiceAccountName; !has("ServiceAccount", d.Namespace, sa) {
			t.Errorf("Deployment %s runs as ServiceAccount %q, which the manifests do not hold", k, sa)
		}
		if !bound[d.Namespace+"/"+d.Spec.Template.Spec.ServiceAccountName] {
			t.Errorf("Deployment %s: its ServiceAccount is bound to no ClusterRole", k)
		}
		for _, c := range d.Spec.Template.Spec.Containers {
			if c.Image == "" {
				t.Errorf("Deployment %s: container %s has no image", k, c.Name)
			}
		}
	}
	for k, o := range byKind["Service"] {
		var s corev1.Service
		convert(t, o, &s)
		sel := labels.SelectorFromSet(s.Spec.Selector)
		matched := false
		for _, d := range byKind["Deployment"] {
			var dep appsv1.Deployment
			convert(t, d, &dep)
			if dep.Namespace == s.Namespace && sel.Matches(labels.Set(dep.Spec.Template.Labels)) {
				matched = true
			}
		}
		if len(s.Spec.Selector) == 0 || !matched {
			t.Errorf("Service %s selects no Pod of the manifests' Deployments (selector %v)", k, s.Spec.Selector)
		}
	}
}

// TestManifestsImage checks that IMG sets the manager's image.
func TestManifestsImage(t *testing.T) {
	const img = "registry.example.com:5000/initlock/initlock-manager:v0.1.0"
	objs := render(t, "IMG="+img)
	found := 0
	for _, o := range objs {
		if o.GetKind() != "Deployment" {
			continue
		}
		var d appsv1.Deployment
		convert(t, o, &d)
		for _, c := range d.Spec.Template.Spec.Containers {
			found++
			if c.Image != img {
				t.Errorf("container %s has image %q, want %q", c.Name, c.Image, img)
			}
		}
	}
	if found == 0 {
		t.Fatal("no container in the manifests")
	}
}

func convert(t *testing.T, u *unstructured.Unstructured, into any) {
	t.Helper()
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, into); err != nil {
		t.Fatalf("reading %s %s: %v", u.GetKind(), key(u), err)
	}
}

// warningCollector keeps the warnings the API server returns.
type warningCollector struct {
	mu       sync.Mutex
	warnings []string
}

var _ rest.WarningHandler = (*warningCollector)(nil)

func (w *warningCollector) HandleWarningHeader(_ int, _ string, text string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.warnings = append(w.warnings, text)
}

func (w *warningCollector) take() []string {
	w.mu.Lock()
	defer w.mu.Unlock()
	out := w.warnings
	w.warnings = nil
	return out
}

func key(o *unstructured.Unstructured) string {
	return fmt.Sprintf("%s/%s", o.GetNamespace(), o.GetName())
}
