package hardened_test

import (
	"context"
	"errors"
	"path/filepath"
	"strings"
	"testing"
	"time"

	velerov1 "github.com/vmware-tanzu/velero/pkg/apis/velero/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/initlock/initlock/internal/kubeenv"
	"github.com/initlock/initlock/internal/relink"
	"github.com/initlock/initlock/test/managertest"
)

// The ServiceAccount the guardrail names: config/ installs the manager as
// it.
const (
	managerNamespace      = "initlock-system"
	managerServiceAccount = "initlock-controller-manager"
)

// installGuardrail creates the objects of config/guardrail and the
// manager's Namespace and ServiceAccount, deletes them when t ends, and
// returns a rest.Config that authenticates as that ServiceAccount with a
// token, bound to rules.
func installGuardrail(t *testing.T, rules []rbacv1.PolicyRule) *rest.Config {
	t.Helper()
	ctx := t.Context()
	root, err := kubeenv.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range []string{"policy.yaml", "binding.yaml"} {
		objs, err := kubeenv.ReadObjects(filepath.Join(root, "config", "guardrail", f))
		if err != nil || len(objs) != 1 {
			t.Fatalf("config/guardrail/%s: %d objects, %v", f, len(objs), err)
		}
		create(t, objs[0])
		t.Cleanup(func() { _ = env.Client.Delete(context.WithoutCancel(ctx), objs[0]) })
	}
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: managerNamespace}}
	// An earlier run in this process (-count) may still be deleting it.
	kubeenv.Eventually(t, 60*time.Second, func() error { return client.IgnoreAlreadyExists(env.Client.Create(ctx, ns.DeepCopy())) })
	t.Cleanup(func() { _ = env.Client.Delete(context.WithoutCancel(ctx), ns) })
	sa := rbacv1.Subject{Kind: rbacv1.ServiceAccountKind, Namespace: managerNamespace, Name: managerServiceAccount}
	env.BindClusterRole(t, "initlock-guardrail-test", rules, sa)
	return env.ServiceAccountConfig(t, managerNamespace, managerServiceAccount)
}

func mergePatch(patch string) client.Patch {
	return client.RawPatch(types.MergePatchType, []byte(patch))
}

// refusedByGuardrail tells whether err is the guardrail's refusal.
func refusedByGuardrail(err error) bool {
	return apierrors.IsForbidden(err) && strings.Contains(err.Error(), "initlock-manager-guardrail: initlock-manager may")
}

// The guardrail refuses the manager's ServiceAccount, even when RBAC lets
// it do anything, every write to a ConfigMap that is not a lock (but the
// relinker's) and every delete but a lock's; it lets it do what the
// manager does, and it does not concern anyone else.
func TestGuardrail(t *testing.T) {
	cfg := installGuardrail(t, installRules(t))
	ns := env.Namespace(t)
	v := env.CAPIVersion

	t.Run("refusals", func(t *testing.T) {
		// RBAC lets the ServiceAccount do anything: every refusal below
		// is the guardrail's.
		env.BindClusterRole(t, "initlock-guardrail-test-everything", []rbacv1.PolicyRule{{APIGroups: []string{"*"}, Resources: []string{"*"}, Verbs: []string{"*"}}},
			rbacv1.Subject{Kind: rbacv1.ServiceAccountKind, Namespace: managerNamespace, Name: managerServiceAccount})
		sa := newClient(t, cfg)
		awsAuth := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "aws-auth"}, Data: map[string]string{"mapRoles": "[]"}}
		create(t, awsAuth)
		// The API server enforces a new policy once it has compiled it.
		kubeenv.Eventually(t, 30*time.Second, func() error {
			err := sa.Patch(t.Context(), awsAuth.DeepCopy(), mergePatch(`{"data":{"mapRoles":"- rolearn: attacker"}}`), client.DryRunAll)
			if !refusedByGuardrail(err) {
				return errors.New("the guardrail does not refuse yet: " + errString(err))
			}
			return nil
		})

		lock := kubeenv.NewLock(ns, "c1", "c1-cp-0", nil)
		settings := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "c1-settings",
			Labels:      map[string]string{"cluster.x-k8s.io/cluster-name": "c1"},
			Annotations: map[string]string{relink.Annotation: relink.Encode([]relink.OwnerRef{plainOwner("Cluster", "c1")})},
		}, Data: map[string]string{"a": "b"}}
		cluster := managertest.CreateCluster(t, env.Client, v, ns, "c1")
		machine := kubeenv.NewMachine(v, ns, "c1", "c1-cp-0")
		create(t, lock, settings, machine)
		secret := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "c1-kubeconfig"}}
		create(t, secret)
		ownerRef := `{"apiVersion":"` + cluster.GetAPIVersion() + `","kind":"Cluster","name":"c1","uid":"` + string(cluster.GetUID()) + `"}`

		for _, tc := range []struct {
			name    string
			do      func(c client.Client) error
			refused bool
		}{
			{"patch aws-auth", func(c client.Client) error {
				return c.Patch(t.Context(), awsAuth.DeepCopy(), mergePatch(`{"metadata":{"annotations":{"x":"y"}}}`))
			}, true},
			{"delete aws-auth", func(c client.Client) error { return c.Delete(t.Context(), awsAuth.DeepCopy(), client.DryRunAll) }, true},
			{"create a ConfigMap", func(c client.Client) error {
				return c.Create(t.Context(), &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "new"}}, client.DryRunAll)
			}, true},
			{"create a lock", func(c client.Client) error {
				return c.Create(t.Context(), kubeenv.NewLock(ns, "c2", "c2-cp-0", nil), client.DryRunAll)
			}, false},
			{"patch a lock", func(c client.Client) error {
				return c.Patch(t.Context(), lock.DeepCopy(), mergePatch(`{"metadata":{"ownerReferences":[`+ownerRef+`],"annotations":{"initlock.dev/releasable":"x"}}}`), client.DryRunAll)
			}, false},
			{"turn a lock into another ConfigMap", func(c client.Client) error {
				return c.Patch(t.Context(), lock.DeepCopy(), mergePatch(`{"data":{"lock-information":null,"other":"x"}}`), client.DryRunAll)
			}, true},
			{"relabel a lock", func(c client.Client) error {
				return c.Patch(t.Context(), lock.DeepCopy(), mergePatch(`{"metadata":{"labels":{"cluster.x-k8s.io/cluster-name":"c2"}}}`), client.DryRunAll)
			}, true},
			{"relink a Cluster's ConfigMap", func(c client.Client) error {
				return c.Patch(t.Context(), settings.DeepCopy(), mergePatch(`{"metadata":{"ownerReferences":[`+ownerRef+`],"annotations":{"`+relink.Annotation+`":null}}}`), client.DryRunAll)
			}, false},
			{"change a Cluster's ConfigMap's data", func(c client.Client) error {
				return c.Patch(t.Context(), settings.DeepCopy(), mergePatch(`{"data":{"a":"changed"}}`), client.DryRunAll)
			}, true},
			{"add an annotation to a Cluster's ConfigMap", func(c client.Client) error {
				return c.Patch(t.Context(), settings.DeepCopy(), mergePatch(`{"metadata":{"annotations":{"`+relink.Annotation+`":null,"x":"y"}}}`), client.DryRunAll)
			}, true},
			{"delete a Machine", func(c client.Client) error { return c.Delete(t.Context(), machine.DeepCopy(), client.DryRunAll) }, true},
			{"delete a Cluster", func(c client.Client) error { return c.Delete(t.Context(), cluster.DeepCopy(), client.DryRunAll) }, true},
			{"delete a Secret", func(c client.Client) error { return c.Delete(t.Context(), secret.DeepCopy(), client.DryRunAll) }, true},
			{"delete a lock", func(c client.Client) error { return c.Delete(t.Context(), lock.DeepCopy(), client.DryRunAll) }, false},
		} {
			err := tc.do(sa)
			if tc.refused && !refusedByGuardrail(err) {
				t.Errorf("%s as the manager: %s, want the guardrail's refusal", tc.name, errString(err))
			}
			if !tc.refused && err != nil {
				t.Errorf("%s as the manager: %v, want it allowed", tc.name, err)
			}
			// Nobody else is concerned.
			if err := tc.do(env.Client); err != nil && !apierrors.IsAlreadyExists(err) {
				t.Errorf("%s as an administrator: %v", tc.name, err)
			}
		}
		err := sa.Delete(t.Context(), machine.DeepCopy(), client.DryRunAll)
		if want := "initlock-manager may delete only init locks; refused: DELETE of cluster.x-k8s.io/machines " + ns + "/c1-cp-0"; err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("refusal of a Machine's delete: %v, want %q", err, want)
		}
	})

	// The manager, as its ServiceAccount with the roles an install binds,
	// relinks a restored graph, adopts a lock and releases it after init
	// without one request refused.
	t.Run("the manager at work", func(t *testing.T) {
		ns := env.Namespace(t)
		create(t, kubeenv.NewLock(ns, "c1", "c1-cp-0", nil), restoredConfigMap(ns, "c1-settings", "c1", plainOwner("Cluster", "c1")))
		create(t, restoredGraph(ns)...)
		create(t, kubeenv.NewMachine(v, ns, "c1", "c1-cp-0"))
		rm, _ := startManager(t, cfg, ns)
		cluster := restoredCluster(t, ns, "c1")
		kubeenv.Eventually(t, 30*time.Second, linkedTo(t, "Machine", ns, "md-0-abc-0", get(t, "MachineSet", ns, "md-0-abc"), controllerOwner("MachineSet", "md-0-abc")))
		kubeenv.Eventually(t, 30*time.Second, func() error {
			cm := &corev1.ConfigMap{}
			if err := env.Client.Get(t.Context(), client.ObjectKey{Namespace: ns, Name: "c1-settings"}, cm); err != nil {
				return err
			}
			if _, ok := cm.Annotations[relink.Annotation]; ok || len(cm.OwnerReferences) != 1 {
				return errors.New("c1-settings not relinked yet")
			}
			lock, err := kubeenv.GetLock(t.Context(), env.Client, ns, "c1")
			if err != nil {
				return err
			}
			return kubeenv.LockOwnedBy(lock, cluster)
		})
		if err := kubeenv.SetInitialized(t.Context(), env.Client, cluster); err != nil {
			t.Fatal(err)
		}
		kubeenv.Eventually(t, 30*time.Second, kubeenv.LockGone(t.Context(), env.Client, ns, "c1"))
		if d := rm.Counter.Denied(); len(d) > 0 {
			t.Fatalf("requests refused to the manager: %v", d)
		}
	})
}

// restoredConfigMap is a ConfigMap of cluster as a restore with initlock's
// Velero plugin leaves it.
func restoredConfigMap(ns, name, cluster string, owners ...relink.OwnerRef) *corev1.ConfigMap {
	return &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name,
		Labels:      map[string]string{"cluster.x-k8s.io/cluster-name": cluster, velerov1.RestoreNameLabel: restoreName},
		Annotations: map[string]string{relink.Annotation: relink.Encode(owners)},
	}, Data: map[string]string{"key": "value"}}
}

func errString(err error) string {
	if err == nil {
		return "allowed"
	}
	return err.Error()
}
