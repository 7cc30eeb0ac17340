package relinksuite

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	velerov1 "github.com/vmware-tanzu/velero/pkg/apis/velero/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/initlock/initlock/internal/kubeenv"
	"github.com/initlock/initlock/internal/relink"
	"github.com/initlock/initlock/internal/relink/secrets"
)

// TestRelinkerNeedsOnlyItsMarkedPermissions runs the relinker on every
// namespace as a user bound only to the rules of its markers, relinks a
// restored graph, warns about a missing owner, and checks that no request
// was refused and that the user can do nothing more. By default it has no
// access to Secrets and leaves them alone; with Secrets enabled, the
// markers of package secrets are all it needs more.
func TestRelinkerNeedsOnlyItsMarkedPermissions(t *testing.T) {
	t.Run("default", func(t *testing.T) { testRestrictedRelinker(t, false) })
	t.Run("secrets", func(t *testing.T) { testRestrictedRelinker(t, true) })
}

func testRestrictedRelinker(t *testing.T, withSecrets bool) {
	ctx := t.Context()
	ns := env.Namespace(t)
	user := "relinker-" + ns
	root, err := kubeenv.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	pkg := filepath.Join(root, "internal", "relink")
	files, opts := []string{filepath.Join(pkg, "rbac.go")}, relink.Options{WarnAfter: -1}
	if withSecrets {
		files, opts = append(files, filepath.Join(pkg, "secrets", "secrets.go")), secrets.Enable(opts)
	}
	env.BindClusterRole(t, user, kubeenv.MarkerRules(t, files...), kubeenv.UserSubject(user))
	cfg, err := env.AddUser(user, nil)
	if err != nil {
		t.Fatal(err)
	}
	// RBAC applies once the authorizer's cache has seen the binding: wait
	// until the user may record an event.
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	kubeenv.Eventually(t, 10*time.Second, func() error {
		attrs := authorizationv1.ResourceAttributes{Namespace: ns, Verb: "create", Group: "events.k8s.io", Resource: "events"}
		r, err := cs.AuthorizationV1().SelfSubjectAccessReviews().Create(ctx,
			&authorizationv1.SelfSubjectAccessReview{Spec: authorizationv1.SelfSubjectAccessReviewSpec{ResourceAttributes: &attrs}}, metav1.CreateOptions{})
		if err == nil && !r.Status.Allowed {
			err = fmt.Errorf("not allowed yet: %+v", attrs)
		}
		return err
	})

	// Restored as Velero does: Secrets and ConfigMaps, Machine objects,
	// the Cluster last; one ConfigMap's owner never comes back.
	secret := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "c1-kubeconfig",
		Labels:      map[string]string{"cluster.x-k8s.io/cluster-name": "c1", velerov1.RestoreNameLabel: restoreName},
		Annotations: map[string]string{relink.Annotation: relink.Encode([]relink.OwnerRef{controllerOwner("Cluster", "c1")})},
	}, Data: map[string][]byte{"value": []byte("secret data")}}
	if err := env.Client.Create(ctx, secret); err != nil {
		t.Fatal(err)
	}
	create(t, restoredConfigMap(t, ns, "c1-lock", "c1", clusterOwner("c1")))
	create(t, restoredConfigMap(t, ns, "orphan", "gone", clusterOwner("gone")))
	md := machineGroup("MachineDeployment", ns, "c1", "md-0")
	md.SetAnnotations(map[string]string{relink.Annotation: relink.Encode([]relink.OwnerRef{clusterOwner("c1")})})
	create(t, restored(t, md))
	ms := machineGroup("MachineSet", ns, "c1", "md-0-abc")
	ms.SetAnnotations(map[string]string{relink.Annotation: relink.Encode([]relink.OwnerRef{controllerOwner("MachineDeployment", "md-0")})})
	create(t, restored(t, ms))
	m := kubeenv.NewMachine(env.CAPIVersion, ns, "c1", "md-0-abc-0")
	m.SetAnnotations(map[string]string{relink.Annotation: relink.Encode([]relink.OwnerRef{controllerOwner("MachineSet", "md-0-abc")})})
	create(t, restored(t, m))

	h := startAs(t, cfg, allNamespaces, opts)
	cluster := create(t, restored(t, kubeenv.NewCluster(env.CAPIVersion, ns, "c1")))
	if withSecrets {
		kubeenv.Eventually(t, 30*time.Second, linked(t, secretGVK, ns, "c1-kubeconfig", refTo(cluster, true)))
	}
	kubeenv.Eventually(t, 30*time.Second, linked(t, configMapGVK, ns, "c1-lock", refTo(cluster, false)))
	kubeenv.Eventually(t, 30*time.Second, linked(t, capiGVK("MachineDeployment"), ns, "md-0", refTo(cluster, false)))
	kubeenv.Eventually(t, 30*time.Second, linked(t, capiGVK("MachineSet"), ns, "md-0-abc", refTo(get(t, capiGVK("MachineDeployment"), ns, "md-0"), true)))
	kubeenv.Eventually(t, 30*time.Second, linked(t, capiGVK("Machine"), ns, "md-0-abc-0", refTo(get(t, capiGVK("MachineSet"), ns, "md-0-abc"), true)))
	kubeenv.Eventually(t, 30*time.Second, func() error {
		if got := events(t, ns, "orphan"); len(got) != 1 {
			return fmt.Errorf("events = %v", got)
		}
		return nil
	})
	// It watches every namespace: requests about the objects of other
	// tests, whose namespaces may be terminating, do not count.
	var denied []string
	for _, d := range h.rm.Counter.Denied() {
		if !strings.Contains(d, "/namespaces/") || strings.Contains(d, "/namespaces/"+ns+"/") {
			denied = append(denied, d)
		}
	}
	if len(denied) > 0 {
		t.Fatalf("requests refused to the relinker: %v", denied)
	}
	if !withSecrets {
		// Relinked only when enabled: the restored Secret keeps its
		// annotation and has no owner.
		got := &corev1.Secret{}
		if err := env.Client.Get(ctx, client.ObjectKeyFromObject(secret), got); err != nil {
			t.Fatal(err)
		}
		if _, ok := got.Annotations[relink.Annotation]; !ok || len(got.OwnerReferences) > 0 {
			t.Fatalf("Secret relinked without Secrets enabled: annotations %v, ownerReferences %v", got.Annotations, got.OwnerReferences)
		}
	}

	uc, err := client.New(cfg, client.Options{Scheme: env.Client.Scheme()})
	if err != nil {
		t.Fatal(err)
	}
	type attempt struct {
		what string
		do   func(context.Context) error
	}
	forbidden := []attempt{
		{"get a secret", func(ctx context.Context) error {
			return uc.Get(ctx, client.ObjectKeyFromObject(secret), &corev1.Secret{})
		}},
		{"update a configmap", func(ctx context.Context) error {
			var cm corev1.ConfigMap
			if err := env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: "c1-lock"}, &cm); err != nil {
				return err
			}
			return uc.Update(ctx, &cm)
		}},
		{"delete a cluster", func(ctx context.Context) error {
			return uc.Delete(ctx, get(t, capiGVK("Cluster"), ns, "c1"))
		}},
		{"create a configmap", func(ctx context.Context) error {
			return uc.Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "new"}})
		}},
		{"list pods", func(ctx context.Context) error { return uc.List(ctx, &corev1.PodList{}, client.InNamespace(ns)) }},
	}
	if !withSecrets {
		forbidden = append(forbidden, attempt{"list secrets", func(ctx context.Context) error {
			return uc.List(ctx, &metav1.PartialObjectMetadataList{TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "SecretList"}}, client.InNamespace(ns))
		}})
	}
	for _, tc := range forbidden {
		if err := tc.do(ctx); !apierrors.IsForbidden(err) {
			t.Errorf("%s as %s: got %v, want Forbidden", tc.what, user, err)
		}
	}
}
