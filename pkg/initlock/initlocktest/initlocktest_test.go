package initlocktest_test

import (
	"context"
	"errors"
	"slices"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	"github.com/initlock/initlock/pkg/initlock"
	"github.com/initlock/initlock/pkg/initlock/capi"
	"github.com/initlock/initlock/pkg/initlock/initlocktest"
)

const ns = "default"

func object(kind, name string) *unstructured.Unstructured {
	u := &unstructured.Unstructured{}
	u.SetAPIVersion(capi.Group + "/" + capi.V1Beta2)
	u.SetKind(kind)
	u.SetNamespace(ns)
	u.SetName(name)
	if kind == "Cluster" {
		u.Object["spec"] = map[string]any{"paused": false}
	}
	return u
}

// get reads obj's live copy from c.
func get(t *testing.T, c client.Client, obj *unstructured.Unstructured) *unstructured.Unstructured {
	t.Helper()
	out := &unstructured.Unstructured{}
	out.SetGroupVersionKind(obj.GroupVersionKind())
	if err := c.Get(t.Context(), client.ObjectKeyFromObject(obj), out); err != nil {
		t.Fatal(err)
	}
	return out
}

// The race of two control-plane Machines for a free lock, as a provider's
// fake-client test runs it: the first is granted the lock, the second is
// refused, without an error, also when its Cluster object was read before
// the first one's grant was written (its compare-and-swap fails its test).
func TestLockerOnTheFakeClient(t *testing.T) {
	cluster, m1, m2 := object("Cluster", "c1"), object("Machine", "m1"), object("Machine", "m2")
	c := initlocktest.NewClientBuilder(cluster, m1, m2).Build()
	for _, o := range []client.Object{cluster, m1, m2} {
		if o.GetUID() == "" {
			t.Fatalf("%s has no UID", o.GetName())
		}
	}
	locker := initlock.New(c)
	stale := get(t, c, cluster)

	res, err := locker.Lock(t.Context(), get(t, c, cluster), m1)
	if err != nil || !res.Acquired {
		t.Fatalf("Lock(m1) = %+v, %v; want acquired", res, err)
	}
	res, err = locker.Lock(t.Context(), get(t, c, cluster), m2)
	if err != nil || res.Acquired || res.Holder != "m1" {
		t.Fatalf("Lock(m2) = %+v, %v; want refused, held by m1", res, err)
	}
	res, err = locker.Lock(t.Context(), stale, m2)
	if err != nil || res.Acquired || res.Holder != "" {
		t.Fatalf("Lock(m2) with the Cluster read before m1's grant = %+v, %v; want refused at once", res, err)
	}
	if err := locker.Unlock(t.Context(), get(t, c, cluster), m1); err != nil {
		t.Fatalf("Unlock(m1): %v", err)
	}
	if err := c.Get(t.Context(), client.ObjectKey{Namespace: ns, Name: "c1-lock"}, &corev1.ConfigMap{}); !apierrors.IsNotFound(err) {
		t.Fatalf("the lock after Unlock: %v, want it gone", err)
	}
}

// Without the package, the same first Lock fails on the plain fake client:
// its objects have no UID, so the grant's compare-and-swap fails its test,
// and the failure is not the API server's answer.
func TestLockerOnThePlainFakeClient(t *testing.T) {
	cluster, m1 := object("Cluster", "c1"), object("Machine", "m1")
	c := fake.NewClientBuilder().WithObjects(cluster, m1).Build()
	res, err := initlock.New(c).Lock(t.Context(), get(t, c, cluster), m1)
	if err == nil || res.Acquired {
		t.Fatalf("Lock(m1) = %+v, %v; want an error: this package is what the fake client needs", res, err)
	}
	if errors.Is(err, initlock.ErrContended) {
		t.Errorf("Lock(m1) error = %v; a failure that is not a lost race must not be reported as contention", err)
	}
}

func TestFuncs(t *testing.T) {
	var called []string
	record := func(verb string) { called = append(called, verb) }
	c := fake.NewClientBuilder().WithObjects(initlocktest.WithUIDs(object("Cluster", "c1"))...).
		WithInterceptorFuncs(initlocktest.Funcs(interceptor.Funcs{
			Create: func(ctx context.Context, c client.WithWatch, obj client.Object, opts ...client.CreateOption) error {
				record("create")
				return c.Create(ctx, obj, opts...)
			},
			Patch: func(ctx context.Context, c client.WithWatch, obj client.Object, p client.Patch, opts ...client.PatchOption) error {
				record("patch")
				return c.Patch(ctx, obj, p, opts...)
			},
			Delete: func(ctx context.Context, c client.WithWatch, obj client.Object, opts ...client.DeleteOption) error {
				record("delete")
				return c.Delete(ctx, obj, opts...)
			},
		})).Build()

	t.Run("create gives a UID", func(t *testing.T) {
		cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "c1-lock"}}
		if err := c.Create(t.Context(), cm); err != nil {
			t.Fatal(err)
		}
		stored := &corev1.ConfigMap{}
		if err := c.Get(t.Context(), client.ObjectKeyFromObject(cm), stored); err != nil {
			t.Fatal(err)
		}
		if cm.UID == "" || stored.UID != cm.UID {
			t.Errorf("UID = %q, stored %q; want the same new UID", cm.UID, stored.UID)
		}
		again := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "c1-lock"}}
		if err := c.Create(t.Context(), again); !apierrors.IsAlreadyExists(err) || again.UID != "" {
			t.Errorf("second create: %v, UID %q; want AlreadyExists and the object left without a UID", err, again.UID)
		}
	})
	t.Run("a failed test is 422 Invalid with the API server's message", func(t *testing.T) {
		cl := object("Cluster", "c1")
		err := c.Patch(t.Context(), cl, client.RawPatch(types.JSONPatchType, []byte(`[{"op":"test","path":"/metadata/uid","value":"not-the-uid"},{"op":"add","path":"/metadata/labels","value":{"a":"b"}}]`)))
		var status apierrors.APIStatus
		if !errors.As(err, &status) || !apierrors.IsInvalid(err) ||
			status.Status().Message != "the server rejected our request due to an error in our request" {
			t.Errorf("patch error = %#v; want the API server's 422", err)
		}
		uid := string(get(t, c, cl).GetUID())
		if err := c.Patch(t.Context(), cl, client.RawPatch(types.JSONPatchType, []byte(`[{"op":"test","path":"/metadata/uid","value":"`+uid+`"},{"op":"add","path":"/metadata/labels","value":{"a":"b"}}]`))); err != nil {
			t.Errorf("patch whose test holds: %v", err)
		}
	})
	t.Run("a delete with another UID is 409 Conflict", func(t *testing.T) {
		cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "c1-lock"}}
		other := types.UID("not-the-uid")
		if err := c.Delete(t.Context(), cm, client.Preconditions{UID: &other}); !apierrors.IsConflict(err) {
			t.Errorf("delete with another UID: %v, want Conflict", err)
		}
		if err := c.Get(t.Context(), client.ObjectKeyFromObject(cm), cm); err != nil {
			t.Fatal(err)
		}
		if err := c.Delete(t.Context(), cm, client.Preconditions{UID: &cm.UID}); err != nil {
			t.Errorf("delete with the object's UID: %v", err)
		}
	})
	want := []string{"create", "create", "patch", "patch", "delete"}
	if !slices.Equal(called, want) {
		t.Errorf("the test's own interceptors were called for %v, want %v", called, want)
	}
}
