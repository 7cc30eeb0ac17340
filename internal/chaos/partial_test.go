package chaos_test

import (
	"context"
	"errors"
	"net/http"
	"os"
	"strings"
	"sync/atomic"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/initlock/initlock/internal/kubeenv"
	"github.com/initlock/initlock/pkg/initlock"
	"github.com/initlock/initlock/pkg/initlock/capi"
)

// breakAt returns a client whose first request matching match fails as
// fail says, and a switch that arms it.
func breakAt(t *testing.T, match func(*http.Request) bool, fail func(rt http.RoundTripper, r *http.Request) (*http.Response, error)) (client.Client, *atomic.Bool) {
	t.Helper()
	var armed atomic.Bool
	cfg := rest.CopyConfig(env.Config)
	cfg.Wrap(func(rt http.RoundTripper) http.RoundTripper {
		return kubeenv.RoundTripperFunc(func(r *http.Request) (*http.Response, error) {
			if match(r) && armed.CompareAndSwap(true, false) {
				return fail(rt, r)
			}
			return rt.RoundTrip(r)
		})
	})
	return newClient(t, cfg), &armed
}

func isGrantList(r *http.Request) bool {
	return r.Method == http.MethodGet && strings.HasSuffix(r.URL.Path, "/machines") && r.URL.Query().Get("labelSelector") != ""
}

func isGrantWrite(r *http.Request) bool {
	return r.Method == http.MethodPatch && strings.Contains(r.URL.Path, "/machines/")
}

var errBroken = errors.New("broken by the test")

// TestNoSecondGrantAfterPartialLock: machine a holds the grant, the lock
// ConfigMap is lost, and machine b's Lock stops part-way (after writing its
// lock and its grant, before or while checking the other grants). However
// b's Lock ended, b's next Lock must not acquire the lock while a exists,
// holds its grant and the cluster is uninitialised.
func TestNoSecondGrantAfterPartialLock(t *testing.T) {
	for _, tc := range []struct {
		name  string
		match func(*http.Request) bool
		fail  func(rt http.RoundTripper, r *http.Request) (*http.Response, error)
	}{
		{"grant list fails", isGrantList, func(http.RoundTripper, *http.Request) (*http.Response, error) {
			return nil, errBroken
		}},
		{"grant written, answer lost", isGrantWrite, func(rt http.RoundTripper, r *http.Request) (*http.Response, error) {
			resp, err := rt.RoundTrip(r)
			if err == nil {
				_ = resp.Body.Close()
			}
			return nil, errBroken
		}},
		{"nothing breaks", func(*http.Request) bool { return false }, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if tc.fail != nil && os.Getenv("CHAOS_PARTIAL_LOCK") != "1" {
				t.Skip("fails: pkg/initlock's healthy re-Lock path trusts a grant whose check of the other grants never completed; " +
					"CHAOS_PARTIAL_LOCK=1 runs it")
			}
			ns := env.Namespace(t)
			cl := kubeenv.NewCluster(capi.V1Beta2, ns, "c")
			a := kubeenv.NewMachine(capi.V1Beta2, ns, "c", "a")
			b := kubeenv.NewMachine(capi.V1Beta2, ns, "c", "b")
			for _, o := range []client.Object{cl, a, b} {
				if err := env.Client.Create(t.Context(), o); err != nil {
					t.Fatal(err)
				}
			}
			if res, err := initlock.New(env.Client).Lock(t.Context(), cl, a); err != nil || !res.Acquired {
				t.Fatalf("a's Lock = %+v, %v", res, err)
			}
			lock := &corev1.ConfigMap{}
			if err := env.Client.Get(t.Context(), client.ObjectKey{Namespace: ns, Name: "c-lock"}, lock); err != nil {
				t.Fatal(err)
			}
			if err := kubeenv.ReleaseLock(t.Context(), env.Client, lock); err != nil {
				t.Fatal(err)
			}
			c, armed := breakAt(t, tc.match, tc.fail)
			locker := initlock.New(c)
			armed.Store(true)
			res, err := locker.Lock(context.WithoutCancel(t.Context()), cl, b)
			t.Logf("b's first Lock: %+v, %v", res, err)
			if res.Acquired {
				t.Fatalf("b acquired the lock a holds")
			}
			fresh := &unstructured.Unstructured{}
			fresh.SetGroupVersionKind(b.GroupVersionKind())
			if err := env.Client.Get(t.Context(), client.ObjectKeyFromObject(b), fresh); err != nil {
				t.Fatal(err)
			}
			res, err = locker.Lock(t.Context(), cl, fresh)
			t.Logf("b's second Lock: %+v, %v", res, err)
			if res.Acquired {
				t.Errorf("b acquired the lock while a, which exists, holds its grant and the cluster is uninitialised")
			}
		})
	}
}
