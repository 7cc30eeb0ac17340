package lockguard_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	admissionv1 "k8s.io/api/admissionregistration/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	"github.com/initlock/initlock/internal/kubeenv"
	"github.com/initlock/initlock/internal/kubeenv/apimodel"
	"github.com/initlock/initlock/internal/lockguard"
)

// TestCheckOnTheModel: Check reads the policy and the binding, one GET
// each whatever it finds, and tells what it read.
func TestCheckOnTheModel(t *testing.T) {
	policyKind := &admissionv1.ValidatingAdmissionPolicy{}
	bindingKind := &admissionv1.ValidatingAdmissionPolicyBinding{}
	for _, tc := range []struct {
		name   string
		delete []client.Object
		// want is "" for in force, else what the error must say.
		want string
	}{
		{"installed", nil, ""},
		{"binding deleted", []client.Object{bindingKind}, "ValidatingAdmissionPolicyBinding initlock-lock-guard is missing"},
		{"policy deleted", []client.Object{policyKind}, "ValidatingAdmissionPolicy initlock-lock-guard is missing"},
		{"both deleted", []client.Object{policyKind, bindingKind}, "are missing: apply config/protection from the release"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g, err := kubeenv.ReadLockGuard()
			if err != nil {
				t.Fatal(err)
			}
			admin := &apimodel.Client{Store: apimodel.NewStore(), Actor: "admin"}
			for _, obj := range []client.Object{g.Policy, g.Binding} {
				if err := admin.Create(t.Context(), obj); err != nil {
					t.Fatal(err)
				}
			}
			for _, kind := range tc.delete {
				obj := kind.DeepCopyObject().(client.Object)
				obj.SetName(name)
				if err := admin.Delete(t.Context(), obj); err != nil {
					t.Fatal(err)
				}
			}
			var c kubeenv.Counter
			found, err := lockguard.Check(t.Context(), &apimodel.Client{Store: admin.Store, Gate: apimodel.Counting{Counter: &c}, Actor: "reader"}, name)
			if got := c.Count("get"); got != 2 || c.Reads() != 2 || c.Writes() != 0 {
				t.Errorf("Check made %d GETs, %d reads and %d writes; want the GETs of the policy and of the binding:\n%s", got, c.Reads(), c.Writes(), &c)
			}
			if deleted := len(tc.delete) > 0 && tc.delete[0] == client.Object(policyKind); deleted != (found.Policy == nil) {
				t.Errorf("Check found policy %v", found.Policy)
			}
			if tc.want == "" {
				if err != nil || found.Policy == nil || found.Binding == nil {
					t.Fatalf("Check = %+v, %v; want both found, in force", found, err)
				}
				return
			}
			if !errors.Is(err, lockguard.ErrNotInForce) || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("Check = %v\nwant ErrNotInForce saying %q", err, tc.want)
			}
		})
	}
}

// TestCheckCannotTell: an error of the API server's but NotFound is no
// verdict: it names what was read and wraps the API error; an API server
// that does not serve admission policies has no guard in force.
func TestCheckCannotTell(t *testing.T) {
	policies := schema.GroupResource{Group: admissionv1.GroupName, Resource: "validatingadmissionpolicies"}
	for _, tc := range []struct {
		name string
		err  error
		// notInForce is the verdict wanted; want what the error says.
		notInForce bool
		want       string
		is         func(error) bool
	}{
		{"forbidden", apierrors.NewForbidden(policies, name, errors.New("no RBAC")), false,
			"reading ValidatingAdmissionPolicy initlock-lock-guard: ", apierrors.IsForbidden},
		{"unavailable", apierrors.NewServiceUnavailable("etcd"), false,
			"reading ValidatingAdmissionPolicy initlock-lock-guard: ", apierrors.IsServiceUnavailable},
		{"not served", &meta.NoKindMatchError{GroupKind: schema.GroupKind{Group: admissionv1.GroupName, Kind: "ValidatingAdmissionPolicy"}, SearchedVersions: []string{"v1"}}, true,
			"the API server does not serve the kind ValidatingAdmissionPolicy of admissionregistration.k8s.io/v1 (Kubernetes 1.30 and later do)", meta.IsNoMatchError},
	} {
		t.Run(tc.name, func(t *testing.T) {
			gets := 0
			c := interceptor.NewClient(fake.NewClientBuilder().WithScheme(kubeenv.Scheme()).Build(), interceptor.Funcs{
				Get: func(ctx context.Context, c client.WithWatch, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
					gets++
					if _, ok := obj.(*admissionv1.ValidatingAdmissionPolicy); ok {
						return tc.err
					}
					return c.Get(ctx, key, obj, opts...)
				},
			})
			_, err := lockguard.Check(t.Context(), c, name)
			if errors.Is(err, lockguard.ErrNotInForce) != tc.notInForce || !tc.is(err) || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("Check = %v\nwant not in force %t, saying %q", err, tc.notInForce, tc.want)
			}
			if gets != 2 {
				t.Errorf("Check made %d GETs, want 2", gets)
			}
		})
	}
}
