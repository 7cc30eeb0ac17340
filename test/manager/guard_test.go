package managersuite_test

import (
	"fmt"
	"strings"
	"testing"
	"time"

	admissionv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	testingclock "k8s.io/utils/clock/testing"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/initlock/initlock/internal/kubeenv"
	"github.com/initlock/initlock/internal/manager"
)

// The manager's lock guard events are on the guard's policy, a
// cluster-scoped object: in the namespace "default".
const (
	guardName      = "initlock-lock-guard"
	guardEventsIn  = metav1.NamespaceDefault
	reasonNotForce = "LockGuardNotInForce"
	reasonInForce  = "LockGuardInForce"
	guardRecheck   = 5 * time.Minute
)

// newGuardEvents returns the events of reason in guardEventsIn that are not
// in seen.
func newGuardEvents(t *testing.T, seen map[string]bool, reason string) []eventsv1.Event {
	t.Helper()
	var out []eventsv1.Event
	for _, e := range events(t, guardEventsIn, reason) {
		if !seen[e.Name] {
			out = append(out, e)
		}
	}
	return out
}

// guardEventNames are the names of the lock guard events already there.
func guardEventNames(t *testing.T) map[string]bool {
	t.Helper()
	seen := map[string]bool{}
	for _, reason := range []string{reasonNotForce, reasonInForce} {
		for _, e := range events(t, guardEventsIn, reason) {
			seen[e.Name] = true
		}
	}
	return seen
}

// recheck moves clk on until the manager rm has read the guard's binding
// again: a check has run.
func recheck(t *testing.T, clk *testingclock.FakeClock, rm *kubeenv.Running) {
	t.Helper()
	bindings := func() int { return rm.Counter.Of("validatingadmissionpolicybindings", "").Count("get") }
	before := bindings()
	kubeenv.Eventually(t, 20*time.Second, func() error {
		if bindings() > before {
			return nil
		}
		clk.Step(guardRecheck)
		return fmt.Errorf("the manager has not looked at the lock guard again")
	})
}

func guardGauge(t *testing.T, want float64) func() error {
	return func() error {
		if got := metricValue(t, manager.LockGuardMetric); got != want {
			return fmt.Errorf("%s = %g, want %g", manager.LockGuardMetric, got, want)
		}
		return nil
	}
}

// TestLockGuardNotInForce: with the lock guard's binding narrowed to no
// namespace, a person may delete a held lock; the manager then sets its
// gauge to 0 and says why in one Warning event on the guard's policy, not
// one per recheck. Restored, the guard is in force again: the gauge is 1
// and one Normal event says so. A validation removed from the policy
// takes its force away again: a second warning names it.
func TestLockGuardNotInForce(t *testing.T) {
	ctx := t.Context()
	ns := env.Namespace(t)
	cluster := createCluster(t, v, ns, "c1")
	createMachine(t, v, ns, "c1", "c1-cp-0")
	lock := lockFor(ns, "c1", "c1-cp-0", cluster)
	create(t, lock)
	seen := guardEventNames(t)

	env.WeakenLockGuard(t, func(g kubeenv.LockGuard) {
		g.Binding.Spec.MatchResources = &admissionv1.MatchResources{
			NamespaceSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"initlock.dev/no-such-label": "x"}}}
	})
	if err := env.Client.Delete(ctx, lock.DeepCopy(), client.DryRunAll); err != nil {
		t.Fatalf("a person's dry-run delete of the held lock: %v, want it let through", err)
	}
	policy := &admissionv1.ValidatingAdmissionPolicy{}
	if err := env.Client.Get(ctx, client.ObjectKey{Name: guardName}, policy); err != nil {
		t.Fatal(err)
	}

	clk := testingclock.NewFakeClock(time.Now())
	opts := testOptions(ns)
	opts.Clock = clk
	rm := startManager(t, env.Config, opts)
	kubeenv.Eventually(t, 20*time.Second, guardGauge(t, 0))
	var warning eventsv1.Event
	kubeenv.Eventually(t, 20*time.Second, func() error {
		got := newGuardEvents(t, seen, reasonNotForce)
		if len(got) != 1 {
			return fmt.Errorf("%d %s events, want 1", len(got), reasonNotForce)
		}
		warning = got[0]
		return nil
	})
	if warning.Type != corev1.EventTypeWarning || warning.Regarding.Kind != "ValidatingAdmissionPolicy" ||
		warning.Regarding.Name != guardName || warning.Regarding.UID != policy.UID ||
		warning.Related == nil || warning.Related.Kind != "ValidatingAdmissionPolicyBinding" ||
		!strings.Contains(warning.Note, "ValidatingAdmissionPolicyBinding initlock-lock-guard keeps the policy from some of the requests it applies to (spec.matchResources.namespaceSelector)") {
		t.Errorf("the warning: %s %s on %+v (related %+v): %s", warning.Type, warning.Reason, warning.Regarding, warning.Related, warning.Note)
	}

	// Two rechecks find the same: no second event.
	recheck(t, clk, rm)
	recheck(t, clk, rm)
	kubeenv.Consistently(t, 2*time.Second, func() error {
		got := newGuardEvents(t, seen, reasonNotForce)
		if len(got) != 1 {
			return fmt.Errorf("%d %s events, want one", len(got), reasonNotForce)
		}
		if got[0].Series != nil {
			return fmt.Errorf("the %s event was emitted again: series %+v", reasonNotForce, got[0].Series)
		}
		return guardGauge(t, 0)()
	})

	// The binding restored: in force again, said once.
	binding := &admissionv1.ValidatingAdmissionPolicyBinding{}
	if err := env.Client.Get(ctx, client.ObjectKey{Name: guardName}, binding); err != nil {
		t.Fatal(err)
	}
	binding.Spec.MatchResources = nil
	if err := env.Client.Update(ctx, binding); err != nil {
		t.Fatal(err)
	}
	recheck(t, clk, rm)
	kubeenv.Eventually(t, 20*time.Second, guardGauge(t, 1))
	kubeenv.Eventually(t, 20*time.Second, func() error {
		got := newGuardEvents(t, seen, reasonInForce)
		if len(got) != 1 || got[0].Type != corev1.EventTypeNormal || got[0].Regarding.UID != policy.UID {
			return fmt.Errorf("%s events %+v, want one Normal event on the policy", reasonInForce, got)
		}
		return nil
	})

	// A validation removed: not in force again, a second warning.
	if err := env.Client.Get(ctx, client.ObjectKeyFromObject(policy), policy); err != nil {
		t.Fatal(err)
	}
	policy.Spec.Validations = policy.Spec.Validations[1:]
	if err := env.Client.Update(ctx, policy); err != nil {
		t.Fatal(err)
	}
	recheck(t, clk, rm)
	kubeenv.Eventually(t, 20*time.Second, guardGauge(t, 0))
	kubeenv.Eventually(t, 20*time.Second, func() error {
		got := newGuardEvents(t, seen, reasonNotForce)
		for _, e := range got {
			if strings.Contains(e.Note, "ValidatingAdmissionPolicy initlock-lock-guard is not the one initlock ships (spec.validations differs)") {
				return nil
			}
		}
		return fmt.Errorf("%d %s events, none naming the validations", len(got), reasonNotForce)
	})
	if got := len(newGuardEvents(t, seen, reasonInForce)); got != 1 {
		t.Errorf("%d %s events, want still 1", got, reasonInForce)
	}
}
