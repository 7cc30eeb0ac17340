package clisuite

import (
	"context"
	"strings"
	"testing"

	admissionv1 "k8s.io/api/admissionregistration/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/initlock/initlock/internal/cli"
	"github.com/initlock/initlock/internal/kubeenv"
)

// guardList is what list -o json says of the lock guard and of each lock's
// protection, decoded on its own so that a LockList without them fails.
type guardList struct {
	LockGuard struct {
		Name, State, Reason string
	} `json:"lockGuard"`
	Items []struct {
		Cluster, Protection string
	} `json:"items"`
}

// weakenings take the lock guard's force away, each as found on a real
// control plane, with what list must then say of it.
var weakenings = []struct {
	name   string
	weaken func(t *testing.T)
	reason string
}{
	{"policy and binding deleted", removeGuard, "the lock guard is not in force: ValidatingAdmissionPolicy initlock-lock-guard and its ValidatingAdmissionPolicyBinding initlock-lock-guard are missing: apply config/protection from the release"},
	{"binding narrowed to no namespace", func(t *testing.T) {
		env.WeakenLockGuard(t, func(g kubeenv.LockGuard) {
			g.Binding.Spec.MatchResources = &admissionv1.MatchResources{
				NamespaceSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"initlock.dev/no-such-label": "x"}}}
		})
	}, "the lock guard is not in force: ValidatingAdmissionPolicyBinding initlock-lock-guard keeps the policy from some of the requests it applies to (spec.matchResources.namespaceSelector): delete it and apply config/protection from the release"},
	{"the validation of deletes removed", dropFirstValidation, "the lock guard is not in force: ValidatingAdmissionPolicy initlock-lock-guard is not the one initlock ships (spec.validations differs): delete it and apply config/protection from the release"},
}

// removeGuard deletes the lock guard's policy and binding until t ends.
func removeGuard(t *testing.T) {
	t.Cleanup(func() {
		if err := env.InstallLockGuard(context.WithoutCancel(t.Context())); err != nil {
			t.Error(err)
		}
	})
	env.RemoveLockGuard(t)
}

// dropFirstValidation removes the lock guard's first validation, that of
// deletes, until t ends.
func dropFirstValidation(t *testing.T) {
	env.WeakenLockGuard(t, func(g kubeenv.LockGuard) { g.Policy.Spec.Validations = g.Policy.Spec.Validations[1:] })
}

// TestListSaysWhenTheGuardIsNotInForce: with the lock guard deleted, its
// binding narrowed to no namespace or a validation removed, a held lock
// can be deleted (a dry-run delete passes); list then shows it unguarded,
// not guarded, in the table and in JSON, and says once why, as repair
// does. Each command reads the policy and the binding once.
func TestListSaysWhenTheGuardIsNotInForce(t *testing.T) {
	for _, tc := range weakenings {
		t.Run(tc.name, func(t *testing.T) {
			b := apiServer()
			ns, _ := b.lockedCluster(t)
			r := b.run(t, invocation{}, "list", "-n", ns).ExpectCode(t, cli.ExitOK)
			if !strings.Contains(r.Out, " guarded ") || r.Err != "" {
				t.Fatalf("before: list does not show the lock guarded, or warns\nstdout:\n%s\nstderr:\n%s", r.Out, r.Err)
			}

			tc.weaken(t)
			lock := kubeenv.MustGetLock(t, b.Client, ns, "c1")
			if err := b.Client.Delete(t.Context(), lock, client.DryRunAll); err != nil {
				t.Fatalf("a dry-run delete of the held lock: %v, want it let through", err)
			}

			var c kubeenv.Counter
			r = b.run(t, invocation{counter: &c}, "list", "-n", ns).ExpectCode(t, cli.ExitOK)
			if !strings.Contains(r.Out, " unguarded ") || strings.Contains(r.Out, " guarded ") {
				t.Errorf("list does not show the held lock unguarded:\n%s", r.Out)
			}
			if want := "Warning: " + tc.reason + ". Until then, anyone may delete a held init lock.\n"; r.Err != want {
				t.Errorf("stderr:\n%q\nwant:\n%q", r.Err, want)
			}
			policies, bindings := c.Of("validatingadmissionpolicies", "").Count("get"), c.Of("validatingadmissionpolicybindings", "").Count("get")
			if policies != 1 || bindings != 1 {
				t.Errorf("list read the policy %d times and the binding %d times, want once each:\n%s", policies, bindings, &c)
			}

			r = b.run(t, invocation{}, "list", "-n", ns, "-o", "json").ExpectCode(t, cli.ExitOK)
			var l guardList
			decodeJSON(t, r.Out, &l)
			if l.LockGuard.Name != "initlock-lock-guard" || l.LockGuard.State != "not-in-force" || l.LockGuard.Reason != tc.reason {
				t.Errorf("list -o json says of the lock guard %+v, want not-in-force: %s", l.LockGuard, tc.reason)
			}
			if len(l.Items) != 1 || l.Items[0].Protection != "unguarded" {
				t.Errorf("list -o json items %+v, want c1 unguarded", l.Items)
			}
			if r.Err != "" {
				t.Errorf("list -o json wrote on stderr: %s", r.Err)
			}

			// repair says that the lock guard is not in force.
			b.run(t, invocation{}, "repair", "-n", ns, "--dry-run=client").ExpectCode(t, cli.ExitOK).ErrHas(t, "Warning: "+tc.reason+".")
		})
	}
}

// TestListWithoutTheRightToReadTheGuard: a user who may read the locks
// but not the admission policies is not told that held locks are guarded:
// their protection is unknown, and list says which permission is missing.
func TestListWithoutTheRightToReadTheGuard(t *testing.T) {
	b := apiServer()
	ns, _ := b.lockedCluster(t)
	kubeconfig := userWith(t, b, ns, "initlock-cli-no-admission", "get", "list")

	r := runAs(t, kubeconfig, "list", "-n", ns).ExpectCode(t, cli.ExitOK)
	if !strings.Contains(r.Out, " unknown ") || strings.Contains(r.Out, "guarded") {
		t.Errorf("list shows the held lock otherwise than of unknown protection:\n%s", r.Out)
	}
	want := `Warning: whether the lock guard is in force is unknown: kubectl-initlock needs "get" on "validatingadmissionpolicies" and "validatingadmissionpolicybindings" (API group "admissionregistration.k8s.io") to read it`
	if !strings.HasPrefix(r.Err, want) || strings.Count(r.Err, "\n") != 1 {
		t.Errorf("stderr:\n%s\nwant one line starting with:\n%s", r.Err, want)
	}
	var l guardList
	decodeJSON(t, runAs(t, kubeconfig, "list", "-n", ns, "-o", "json").ExpectCode(t, cli.ExitOK).Out, &l)
	if l.LockGuard.State != "unknown" || !strings.Contains(l.LockGuard.Reason, `needs "get" on "validatingadmissionpolicies"`) ||
		len(l.Items) != 1 || l.Items[0].Protection != "unknown" {
		t.Errorf("list -o json says %+v", l)
	}
}
