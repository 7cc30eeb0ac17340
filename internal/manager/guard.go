package manager

import (
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	admissionv1 "k8s.io/api/admissionregistration/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/metrics"
)

// The manager checks that the lock guard it ships is installed and bound.
// +kubebuilder:rbac:groups=admissionregistration.k8s.io,resources=validatingadmissionpolicies;validatingadmissionpolicybindings,verbs=get

// DefaultLockGuard is the name config/default gives the lock guard's
// ValidatingAdmissionPolicy and its binding.
const DefaultLockGuard = "initlock-lock-guard"

// LockGuardMetric is the gauge that tells whether the lock guard is
// installed and bound to deny (1) or not (0).
const LockGuardMetric = "initlock_lock_guard_installed"

// guardRecheck is how often the manager looks at the lock guard again.
const guardRecheck = 5 * time.Minute

var guardGauge = prometheus.NewGauge(prometheus.GaugeOpts{
	Name: LockGuardMetric,
	Help: "1 when the lock guard (the ValidatingAdmissionPolicy that refuses deletes of held init locks) is installed and bound with the Deny action, 0 when it is not: held locks can then be deleted.",
})

func init() { metrics.Registry.MustRegister(guardGauge) }

// guardCheck looks at the lock guard named name at start and every
// guardRecheck: a missing or unbound guard leaves every lock deletable by
// the garbage collector, a person or a provider's own release, and says
// so in the log and in LockGuardMetric. It decides nothing and writes
// nothing.
type guardCheck struct {
	reader client.Reader
	name   string
}

func (g guardCheck) Start(ctx context.Context) error {
	log := ctrl.LoggerFrom(ctx).WithName("lock-guard")
	warned := false
	for {
		err := g.check(ctx)
		switch {
		case err == nil:
			guardGauge.Set(1)
			warned = false
		case ctx.Err() != nil:
		default:
			guardGauge.Set(0)
			if !warned {
				log.Error(err, "Held init locks are not protected from deletes: install the lock guard of the release (config/protection)", "policy", g.name)
				warned = true
			}
		}
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(guardRecheck):
		}
	}
}

// check reads the policy and its binding.
func (g guardCheck) check(ctx context.Context) error {
	key := types.NamespacedName{Name: g.name}
	if err := g.reader.Get(ctx, key, &admissionv1.ValidatingAdmissionPolicy{}); err != nil {
		return fmt.Errorf("reading ValidatingAdmissionPolicy %s: %w", g.name, notInstalled(err))
	}
	b := &admissionv1.ValidatingAdmissionPolicyBinding{}
	if err := g.reader.Get(ctx, key, b); err != nil {
		return fmt.Errorf("reading ValidatingAdmissionPolicyBinding %s: %w", g.name, notInstalled(err))
	}
	if b.Spec.PolicyName != g.name || !slices.Contains(b.Spec.ValidationActions, admissionv1.Deny) {
		return fmt.Errorf("ValidatingAdmissionPolicyBinding %s binds policy %q with actions %v, want %q with Deny", g.name, b.Spec.PolicyName, b.Spec.ValidationActions, g.name)
	}
	return nil
}

func notInstalled(err error) error {
	if apierrors.IsNotFound(err) {
		return fmt.Errorf("not installed: %w", err)
	}
	return err
}
