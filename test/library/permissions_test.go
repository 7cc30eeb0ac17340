package library_test

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	authorizationv1 "k8s.io/api/authorization/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/initlock/initlock/internal/kubeenv"
)

// markerFiles hold the RBAC markers a provider copies: the example
// reconciler's, which must be the package documentation's and
// docs/adopting.md's too.
var markerFiles = []string{
	filepath.Join("..", "..", "pkg", "initlock", "locking", "example_test.go"),
	filepath.Join("..", "..", "pkg", "initlock", "locking", "doc.go"),
	filepath.Join("..", "..", "docs", "adopting.md"),
}

// TestMutexNeedsItsMarkedPermissions runs the mutex as a user bound only
// to the rules of the example's markers, through a free lock, a refusal, a
// take-over from a Machine that is gone and a release: every step does
// what it does as an administrator. Without any one of the verbs (events
// aside, which only a recorder uses) some step fails.
func TestMutexNeedsItsMarkedPermissions(t *testing.T) {
	rules := kubeenv.MarkerRules(t, markerFiles[0])
	example, err := os.ReadFile(markerFiles[0])
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range markerFiles[1:] {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for line := range strings.Lines(string(example)) {
			if m := strings.TrimSpace(line); strings.HasPrefix(m, "// +kubebuilder:rbac:") && !strings.Contains(string(b), m) {
				t.Errorf("%s does not carry the example's marker %s", f, m)
			}
		}
	}
	if err := lockScenario(t, rules); err != nil {
		t.Fatalf("with the marked permissions: %v", err)
	}
	for i, r := range rules {
		if slices.Contains(r.APIGroups, "events.k8s.io") {
			continue
		}
		for _, verb := range r.Verbs {
			t.Run("without "+verb+" "+strings.Join(r.Resources, ","), func(t *testing.T) {
				less := slices.Clone(rules)
				less[i].Verbs = slices.DeleteFunc(slices.Clone(r.Verbs), func(v string) bool { return v == verb })
				if len(less[i].Verbs) == 0 {
					less = slices.Delete(less, i, i+1)
				}
				if err := lockScenario(t, less); err == nil {
					t.Errorf("the mutex needs no %s on %v: the marker asks for too much", verb, r.Resources)
				}
			})
		}
	}
}

// lockScenario runs the mutex as a user with rules and returns the first
// step that did not go as it goes with every permission.
func lockScenario(t *testing.T, rules []rbacv1.PolicyRule) error {
	f := newFixture(t)
	mu := newMutex(f.restrictedClient(t, rules))
	ctx := t.Context()
	m1, m2 := f.machine("m1"), f.machine("m2")
	if !mu.Lock(ctx, f.cluster, m1) {
		return fmt.Errorf("Lock(m1) on a free lock = false")
	}
	if mu.Lock(ctx, f.get(f.cluster), m2) {
		return fmt.Errorf("Lock(m2) while m1 holds the lock = true")
	}
	kubeenv.DeleteAndWait(t, env.Client, m1)
	if !mu.Lock(ctx, f.get(f.cluster), m2) {
		return fmt.Errorf("Lock(m2) once m1 is gone = false")
	}
	f.expectHeld(t, "m2")
	if !mu.Unlock(ctx, f.get(f.cluster)) {
		return fmt.Errorf("Unlock() = false")
	}
	if kubeenv.MustGetLock(f.t, env.Client, f.ns, "c1") != nil {
		return fmt.Errorf("Unlock() left the lock")
	}
	return nil
}

// restrictedClient returns a client of the user provider-<namespace>,
// bound to rules only, once the authorizer applies them. It counts its
// requests in f.counter.
func (f *fixture) restrictedClient(t *testing.T, rules []rbacv1.PolicyRule) client.Client {
	t.Helper()
	ctx, user := t.Context(), "provider-"+f.ns
	env.BindClusterRole(t, user, rules, kubeenv.UserSubject(user))
	cfg, err := env.AddUser(user, nil)
	if err != nil {
		t.Fatal(err)
	}
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	// RBAC applies once the authorizer's cache has seen the binding: wait
	// until the user may do the first thing the rules allow.
	attrs := &authorizationv1.ResourceAttributes{Verb: rules[0].Verbs[0], Group: rules[0].APIGroups[0], Resource: rules[0].Resources[0]}
	kubeenv.Eventually(t, 10*time.Second, func() error {
		r, err := cs.AuthorizationV1().SelfSubjectAccessReviews().Create(ctx, &authorizationv1.SelfSubjectAccessReview{
			Spec: authorizationv1.SelfSubjectAccessReviewSpec{ResourceAttributes: attrs}}, metav1.CreateOptions{})
		if err != nil {
			return err
		}
		if !r.Status.Allowed {
			return fmt.Errorf("%s may not %s %s yet", user, attrs.Verb, attrs.Resource)
		}
		return nil
	})
	c, err := client.New(f.counter.CountingConfig(cfg), client.Options{Scheme: kubeenv.Scheme()})
	if err != nil {
		t.Fatal(err)
	}
	return c
}
