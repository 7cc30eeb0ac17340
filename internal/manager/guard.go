package manager

import (
	"context"
	"errors"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	admissionv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/tools/events"
	"k8s.io/utils/clock"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/metrics"

	"github.com/initlock/initlock/internal/lockguard"
)

// The manager checks that the lock guard it ships is in force.
// +kubebuilder:rbac:groups=admissionregistration.k8s.io,resources=validatingadmissionpolicies;validatingadmissionpolicybindings,verbs=get

// DefaultLockGuard is the name config/default gives the lock guard's
// ValidatingAdmissionPolicy and its binding.
const DefaultLockGuard = lockguard.DefaultName

// LockGuardMetric is the gauge that tells whether the lock guard is in
// force (1) or not, or not known to be (0).
const LockGuardMetric = "initlock_lock_guard_installed"

// The reasons of the events the lock guard check emits.
const (
	// ReasonLockGuardNotInForce is the Warning event of a check that finds
	// the lock guard not in force, at start or after it was in force; its
	// note says why and what to do.
	ReasonLockGuardNotInForce = "LockGuardNotInForce"
	// ReasonLockGuardInForce is the Normal event of a check that finds it
	// in force again after a ReasonLockGuardNotInForce.
	ReasonLockGuardInForce = "LockGuardInForce"
)

// guardRecheck is how often the manager looks at the lock guard again, on
// Options.Clock.
const guardRecheck = 5 * time.Minute

var guardGauge = prometheus.NewGauge(prometheus.GaugeOpts{
	Name: LockGuardMetric,
	Help: "1 when the lock guard (the ValidatingAdmissionPolicy that refuses deletes of held init locks) is in force: installed as initlock ships it and bound with the Deny action to every request it matches; 0 when it is not, or cannot be read: held locks may then be deleted.",
})

func init() { metrics.Registry.MustRegister(guardGauge) }

// guardCheck looks at the lock guard named name at start and every
// guardRecheck, with lockguard.Check: a guard that is not in force leaves
// every lock deletable by the garbage collector, a person or a provider's
// own release. It sets LockGuardMetric each time; it logs, and emits an
// event, only when what it finds changes. It decides nothing and writes
// nothing but events.
//
// The events regard the guard's ValidatingAdmissionPolicy, the object
// that is wrong or missing (by name when missing; with the binding as the
// related object when there is one), as Kubernetes records events on the
// object they are about: they are in the namespace "default", where the
// events of every cluster-scoped object are, and kubectl describe of the
// policy shows them.
type guardCheck struct {
	reader   client.Reader
	name     string
	recorder events.EventRecorder
	clock    clock.WithTicker
}

// guardState is what a check found.
type guardState int

const (
	guardUnchecked guardState = iota
	guardInForce
	guardNotInForce
	guardUnknown
)

func stateOf(err error) guardState {
	switch {
	case err == nil:
		return guardInForce
	case errors.Is(err, lockguard.ErrNotInForce):
		return guardNotInForce
	}
	return guardUnknown
}

func (g guardCheck) Start(ctx context.Context) error {
	log := ctrl.LoggerFrom(ctx).WithName("lock-guard")
	var last, known guardState
	for {
		found, err := lockguard.Check(ctx, g.reader, g.name)
		if ctx.Err() != nil {
			return nil
		}
		state := stateOf(err)
		if state == guardInForce {
			guardGauge.Set(1)
		} else {
			guardGauge.Set(0)
		}
		if state != last {
			switch state {
			case guardInForce:
				log.Info("The lock guard is in force", "policy", g.name)
			case guardNotInForce:
				log.Error(err, "Held init locks are not protected from deletes", "policy", g.name)
			case guardUnknown:
				log.Error(err, "Cannot tell whether the lock guard is in force", "policy", g.name)
			}
		}
		// Events tell the changes between in force and not in force: a
		// check that cannot tell, in between, changes nothing.
		if state != guardUnknown && state != known {
			g.event(found, state, known, err)
			known = state
		}
		last = state
		select {
		case <-ctx.Done():
			return nil
		case <-g.clock.After(guardRecheck):
		}
	}
}

// event emits the event of a change to state from was.
func (g guardCheck) event(found lockguard.Guard, state, was guardState, err error) {
	if g.recorder == nil || state == guardInForce && was == guardUnchecked {
		return
	}
	var regarding runtime.Object = &admissionv1.ValidatingAdmissionPolicy{ObjectMeta: metav1.ObjectMeta{Name: g.name}}
	if found.Policy != nil {
		regarding = found.Policy
	}
	var related runtime.Object
	if found.Binding != nil {
		related = found.Binding
	}
	if state == guardInForce {
		g.recorder.Eventf(regarding, related, corev1.EventTypeNormal, ReasonLockGuardInForce, "CheckLockGuard",
			"The lock guard is in force again: held init locks are protected from deletes")
		return
	}
	g.recorder.Eventf(regarding, related, corev1.EventTypeWarning, ReasonLockGuardNotInForce, "CheckLockGuard",
		"Held init locks can be deleted by anyone (the garbage collector, a person, a provider's own release), and a second Machine may then run kubeadm init: %v", err)
}
