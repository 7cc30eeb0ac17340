package relink_test

import (
	"context"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/initlock/initlock/internal/kubeenv"
	"github.com/initlock/initlock/internal/relink"
)

// markerRules reads the RBAC rules from the kubebuilder markers of
// rbac.go, the source controller-gen generates the role from.
func markerRules(t *testing.T) []rbacv1.PolicyRule {
	t.Helper()
	b, err := os.ReadFile("rbac.go")
	if err != nil {
		t.Fatal(err)
	}
	var rules []rbacv1.PolicyRule
	for line := range strings.Lines(string(b)) {
		spec, ok := strings.CutPrefix(strings.TrimSpace(line), "// +kubebuilder:rbac:")
		if !ok {
			continue
		}
		var rule rbacv1.PolicyRule
		for kv := range strings.SplitSeq(spec, ",") {
			k, v, _ := strings.Cut(kv, "=")
			values := strings.Split(strings.Trim(v, `"`), ";")
			switch k {
			case "groups":
				rule.APIGroups = values
			case "resources":
				rule.Resources = values
			case "verbs":
				rule.Verbs = values
			default:
				t.Fatalf("marker %q: unexpected key %q", spec, k)
			}
		}
		rules = append(rules, rule)
	}
	if len(rules) == 0 {
		t.Fatal("no RBAC marker in rbac.go")
	}
	return rules
}

// TestRelinkerNeedsOnlyItsMarkedPermissions runs the relinker on every
// namespace as a user bound only to the rules of its markers, relinks a
// restored graph, warns about a missing owner, and checks that no request
// was refused and that the user can do nothing more.
func TestRelinkerNeedsOnlyItsMarkedPermissions(t *testing.T) {
	ctx := t.Context()
	ns := env.Namespace(t)
	user := "relinker-" + ns
	role := &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: user}, Rules: markerRules(t)}
	binding := &rbacv1.ClusterRoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: user},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: user},
		Subjects:   []rbacv1.Subject{{Kind: rbacv1.UserKind, APIGroup: rbacv1.GroupName, Name: user}},
	}
	for _, obj := range []client.Object{role, binding} {
		if err := env.Client.Create(ctx, obj); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = env.Client.Delete(context.WithoutCancel(ctx), obj) })
	}
	cfg, err := env.AddUser(user, nil)
	if err != nil {
		t.Fatal(err)
	}

	// Restored as Velero does: Secrets and ConfigMaps, Machine objects,
	// the Cluster last; one ConfigMap's owner never comes back.
	secret := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "c1-kubeconfig",
		Labels:      map[string]string{"cluster.x-k8s.io/cluster-name": "c1"},
		Annotations: map[string]string{relink.Annotation: relink.Encode([]relink.OwnerRef{controllerOwner("Cluster", "c1")})},
	}, Data: map[string][]byte{"value": []byte("secret data")}}
	if err := env.Client.Create(ctx, secret); err != nil {
		t.Fatal(err)
	}
	create(t, restoredConfigMap(t, ns, "c1-lock", "c1", clusterOwner("c1")))
	create(t, restoredConfigMap(t, ns, "orphan", "gone", clusterOwner("gone")))
	md := newMachineDeployment(ns, "c1", "md-0")
	md.SetAnnotations(map[string]string{relink.Annotation: relink.Encode([]relink.OwnerRef{clusterOwner("c1")})})
	create(t, md)
	ms := newMachineSet(ns, "c1", "md-0-abc")
	ms.SetAnnotations(map[string]string{relink.Annotation: relink.Encode([]relink.OwnerRef{controllerOwner("MachineDeployment", "md-0")})})
	create(t, ms)
	m := kubeenv.NewMachine(env.CAPIVersion, ns, "c1", "md-0-abc-0")
	m.SetAnnotations(map[string]string{relink.Annotation: relink.Encode([]relink.OwnerRef{controllerOwner("MachineSet", "md-0-abc")})})
	create(t, m)

	h := startAs(t, cfg, allNamespaces, relink.Options{WarnAfter: -1})
	cluster := create(t, kubeenv.NewCluster(env.CAPIVersion, ns, "c1"))
	kubeenv.Eventually(t, 30*time.Second, linked(t, secretGVK, ns, "c1-kubeconfig", refTo(cluster, true)))
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
	if d := h.log.deniedRequests(); len(d) > 0 {
		t.Fatalf("requests refused to the relinker: %v", d)
	}

	uc, err := client.New(cfg, client.Options{Scheme: env.Client.Scheme()})
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		what string
		do   func(context.Context) error
	}{
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
		{"delete a machine", func(ctx context.Context) error {
			return uc.Delete(ctx, get(t, capiGVK("Machine"), ns, "md-0-abc-0"))
		}},
		{"create a configmap", func(ctx context.Context) error {
			return uc.Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "new"}})
		}},
		{"list pods", func(ctx context.Context) error { return uc.List(ctx, &corev1.PodList{}, client.InNamespace(ns)) }},
	} {
		if err := tc.do(ctx); !apierrors.IsForbidden(err) {
			t.Errorf("%s as %s: got %v, want Forbidden", tc.what, user, err)
		}
	}
}
