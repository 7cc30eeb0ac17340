package kubeenv

import (
	"context"
	"fmt"
	"testing"
	"time"

	admissionv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/initlock/initlock/config/protection"
	"github.com/initlock/initlock/internal/kubeenv/wire"
	"github.com/initlock/initlock/internal/lockguard"
)

// LockGuardFile is the admission policy that keeps a held init lock from
// being deleted (config/protection), relative to the repository root.
const LockGuardFile = protection.LockGuardFile

// LockGuardPrefix is the namePrefix config/default gives every object it
// installs, the lock guard's policy and binding among them
// (test/manifests checks that the install renders what ReadLockGuard
// returns).
const LockGuardPrefix = "initlock-"

// LockGuard is the admission policy of LockGuardFile and its binding, as
// installed: named with config/default's prefix (LockGuardPrefix).
type LockGuard struct {
	Policy  *admissionv1.ValidatingAdmissionPolicy
	Binding *admissionv1.ValidatingAdmissionPolicyBinding
}

// ReadLockGuard reads LockGuardFile as the binaries embed it
// (lockguard.Shipped), named as installed.
func ReadLockGuard() (LockGuard, error) {
	policy, binding, err := lockguard.Shipped()
	if err != nil {
		return LockGuard{}, err
	}
	g := LockGuard{Policy: policy, Binding: binding}
	g.Policy.Name = LockGuardPrefix + g.Policy.Name
	g.Binding.Name = LockGuardPrefix + g.Binding.Name
	g.Binding.Spec.PolicyName = LockGuardPrefix + g.Binding.Spec.PolicyName
	return g, nil
}

// InstallLockGuard installs the shipped lock guard (LockGuardFile) and
// returns once the API server enforces it: a delete of an unmarked lock in
// a scratch namespace is refused. The policy is cluster-wide: install it
// once per Env (TestMain), before tests that rely on it.
func (e *Env) InstallLockGuard(ctx context.Context) error {
	g, err := ReadLockGuard()
	if err != nil {
		return err
	}
	for _, obj := range []client.Object{g.Policy, g.Binding} {
		if err := e.Client.Create(ctx, obj); err != nil && !apierrors.IsAlreadyExists(err) {
			return fmt.Errorf("installing the lock guard: %w", err)
		}
	}
	// The API server loads policies from its informer: wait until it
	// refuses the delete of a lock.
	return e.waitLockGuard(ctx, true)
}

// waitLockGuard waits, 30 s at most, until the API server enforces the
// lock guard (or, with enforced false, no longer does): a dry-run delete
// of an unmarked lock in a scratch namespace is refused (or allowed).
func (e *Env) waitLockGuard(ctx context.Context, enforced bool) error {
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: "lock-guard-probe-"}}
	if err := e.Client.Create(ctx, ns); err != nil {
		return err
	}
	defer func() { _ = e.Client.Delete(context.WithoutCancel(ctx), ns) }()
	probe := NewLock(ns.Name, "probe", "m0", nil)
	if err := e.Client.Create(ctx, probe); err != nil {
		return err
	}
	deadline := time.Now().Add(30 * time.Second)
	for {
		err := e.Client.Delete(ctx, probe.DeepCopy(), client.DryRunAll)
		if apierrors.IsForbidden(err) == enforced && (enforced || err == nil) {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("the lock guard's enforcement is not %t 30s on (a dry-run delete answered %w)", enforced, err)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// RemoveLockGuard deletes the lock guard installed by InstallLockGuard and
// returns once the API server no longer enforces it. It may run in a
// test's Cleanup.
func (e *Env) RemoveLockGuard(t testing.TB) {
	t.Helper()
	if err := e.UninstallLockGuard(context.WithoutCancel(t.Context())); err != nil {
		t.Fatal(err)
	}
}

// UninstallLockGuard deletes the lock guard's binding, then its policy, and
// returns once the API server no longer enforces it. A guard that is not
// installed is no error.
func (e *Env) UninstallLockGuard(ctx context.Context) error {
	g, err := ReadLockGuard()
	if err != nil {
		return err
	}
	for _, obj := range []client.Object{g.Binding, g.Policy} {
		if err := client.IgnoreNotFound(e.Client.Delete(ctx, obj)); err != nil {
			return fmt.Errorf("removing the lock guard: %w", err)
		}
	}
	return e.waitLockGuard(ctx, false)
}

// WeakenLockGuard edits the installed lock guard with change, which
// changes the live policy and binding it is given in place, writes both,
// and returns once the API server no longer refuses the delete of an
// unmarked lock. When t ends, the shipped guard is installed again
// (removed, then installed and enforced). Tests use it to take the
// guard's force away while it stays installed: a binding narrowed, a
// validation removed.
func (e *Env) WeakenLockGuard(t testing.TB, change func(live LockGuard)) {
	t.Helper()
	ctx := t.Context()
	g, err := ReadLockGuard()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx := context.WithoutCancel(t.Context())
		if err := e.UninstallLockGuard(ctx); err != nil {
			t.Error(err)
		}
		if err := e.InstallLockGuard(ctx); err != nil {
			t.Error(err)
		}
	})
	for _, obj := range []client.Object{g.Policy, g.Binding} {
		if err := e.Client.Get(ctx, client.ObjectKeyFromObject(obj), obj); err != nil {
			t.Fatalf("reading the lock guard: %v", err)
		}
	}
	change(g)
	for _, obj := range []client.Object{g.Policy, g.Binding} {
		if err := e.Client.Update(ctx, obj); err != nil {
			t.Fatalf("changing the lock guard: %v", err)
		}
	}
	if err := e.waitLockGuard(ctx, false); err != nil {
		t.Fatal(err)
	}
}

// ReleaseLock deletes the lock cm names as a release does, past the lock
// guard: it marks the lock for release (wire.ReleaseAnnotation, its own
// UID), then deletes it. Tests use it to lose a lock on purpose. A lock
// that is gone already is no error. A keeper running beside it may take
// the mark off between the two (its own release, which marks the lock
// too, stopping): a delete the guard then refuses is tried again, marked
// again, a few times.
func ReleaseLock(ctx context.Context, c client.Client, cm *corev1.ConfigMap) error {
	var err error
	for range 5 {
		if err = markAndDelete(ctx, c, cm); !apierrors.IsForbidden(err) && !apierrors.IsConflict(err) {
			return err
		}
	}
	return err
}

func markAndDelete(ctx context.Context, c client.Client, cm *corev1.ConfigMap) error {
	cur := &corev1.ConfigMap{}
	if err := c.Get(ctx, client.ObjectKeyFromObject(cm), cur); err != nil {
		return client.IgnoreNotFound(err)
	}
	marked := cur.DeepCopy()
	if marked.Annotations == nil {
		marked.Annotations = map[string]string{}
	}
	marked.Annotations[wire.ReleaseAnnotation] = string(cur.UID)
	marked.Annotations[wire.ReleaseStartedAnnotation] = time.Now().UTC().Format(time.RFC3339)
	if err := c.Patch(ctx, marked, client.MergeFrom(cur)); err != nil {
		return client.IgnoreNotFound(fmt.Errorf("marking lock %s/%s for release: %w", cur.Namespace, cur.Name, err))
	}
	// The guard lets a marked lock's delete through only when it names the
	// lock's current resourceVersion: the one the mark's write left.
	return client.IgnoreNotFound(c.Delete(ctx, marked, client.Preconditions{UID: &marked.UID, ResourceVersion: &marked.ResourceVersion}))
}
