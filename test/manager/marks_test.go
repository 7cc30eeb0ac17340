package managersuite_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	velerov1 "github.com/vmware-tanzu/velero/pkg/apis/velero/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	"github.com/initlock/initlock/internal/kubeenv"
	"github.com/initlock/initlock/internal/kubeenv/velerosim"
	"github.com/initlock/initlock/internal/kubeenv/wire"
	"github.com/initlock/initlock/pkg/initlock"
	"github.com/initlock/initlock/pkg/initlock/keeper"
)

// TestLeftMarksTakenOff: the lock guard refuses an update that takes a
// held lock's shape away (its cluster-name label, its lock-information
// key), which would make it an ordinary ConfigMap anyone may delete; an
// update that keeps the shape goes through. A mark that lets a delete
// through, left on a held lock (a release mark whose releaser stopped
// before its delete, clusterctl move's delete-for-move left by a move that
// failed), is taken off by the manager once the Cluster is unpaused, and
// left while it is paused (a move is under way): one write, the marks
// taken off.
func TestLeftMarksTakenOff(t *testing.T) {
	ns := env.Namespace(t)
	cluster := createCluster(t, v, ns, "c1", paused)
	createMachine(t, v, ns, "c1", "c1-cp-0")
	lock := lockFor(ns, "c1", "c1-cp-0", cluster)
	create(t, lock)

	for _, patch := range []string{
		`[{"op":"remove","path":"/metadata/labels/cluster.x-k8s.io~1cluster-name"}]`,
		`[{"op":"replace","path":"/metadata/labels/cluster.x-k8s.io~1cluster-name","value":"c2"}]`,
		`[{"op":"remove","path":"/data/lock-information"}]`,
	} {
		err := env.Client.Patch(t.Context(), lock.DeepCopy(), client.RawPatch(types.JSONPatchType, []byte(patch)))
		if !apierrors.IsForbidden(err) || !strings.Contains(err.Error(), "kubectl initlock release c1 -n "+ns+" --force") {
			t.Fatalf("update %s of a held lock: %v; want a refusal naming kubectl initlock release --force", patch, err)
		}
	}
	marks := fmt.Sprintf(`{"metadata":{"annotations":{%q:%q,%q:""}}}`, wire.ReleaseAnnotation, lock.UID, wire.MoveAnnotation)
	if err := env.Client.Patch(t.Context(), lock, client.RawPatch(types.MergePatchType, []byte(marks))); err != nil {
		t.Fatalf("an update that keeps the shape: %v", err)
	}

	rm := startManager(t, env.Config, testOptions(ns))
	kubeenv.Consistently(t, 2*time.Second, func() error {
		if n := rm.Counter.Writes(); n != 0 {
			return fmt.Errorf("%d writes while paused:\n%s", n, rm.Counter)
		}
		return nil
	})
	if err := env.Client.Get(t.Context(), client.ObjectKeyFromObject(cluster), cluster); err != nil {
		t.Fatal(err)
	}
	unstructured.RemoveNestedField(cluster.Object, "spec", "paused")
	if err := env.Client.Update(t.Context(), cluster); err != nil {
		t.Fatal(err)
	}
	kubeenv.Eventually(t, 20*time.Second, func() error {
		cm, err := getLock(t, ns, "c1")
		if err != nil {
			return err
		}
		for _, k := range []string{wire.ReleaseAnnotation, wire.MoveAnnotation} {
			if _, ok := cm.Annotations[k]; ok {
				return fmt.Errorf("lock still carries %s", k)
			}
		}
		if rec, _ := wire.DecodeRecord(cm.Data[wire.DataKey]); rec.MachineName != "c1-cp-0" {
			return fmt.Errorf("lock names %q, want c1-cp-0", rec.MachineName)
		}
		return nil
	})
	if err := env.Client.Delete(t.Context(), lock.DeepCopy()); !apierrors.IsForbidden(err) {
		t.Fatalf("delete of the lock once the manager took its marks off: %v, want forbidden", err)
	}
	kubeenv.Consistently(t, time.Second, func() error { return nil })
	if n := rm.Counter.Of("configmaps", ns).Writes(); n != 1 {
		t.Fatalf("configmap writes = %d, want 1 (the marks taken off):\n%s", n, rm.Counter)
	}
	eventOn(t, ns, "LockUnmarked", "Cluster", "c1")
}

// TestMoveMarkedCopyHeld: a backup taken while a clusterctl move was
// failing holds a lock carrying delete-for-move. Restored as a copy that
// keeps its Cluster's old UID, before its holder Machine is back: the lock
// guard refuses the garbage collector's delete all the same (it never
// moves anything), and the manager takes the mark off while it waits for
// the holder, after which nobody's delete passes.
func TestMoveMarkedCopyHeld(t *testing.T) {
	ns := env.Namespace(t)
	createCluster(t, v, ns, "c1")
	createMachine(t, v, ns, "c1", "c1-cp-1")
	lock := lockFor(ns, "c1", "c1-cp-0", nil)
	lock.OwnerReferences = []metav1.OwnerReference{{APIVersion: "cluster.x-k8s.io/v1beta2", Kind: "Cluster", Name: "c1",
		UID: types.UID("00000000-0000-0000-0000-00000000dead")}}
	lock.Annotations = map[string]string{wire.MoveAnnotation: ""}
	create(t, lock)
	kubeenv.Consistently(t, 4*time.Second, func() error { // the collector's turn, the manager down
		cm, err := getLock(t, ns, "c1")
		if err != nil {
			return fmt.Errorf("the held copy went: %w", err)
		}
		if cm.DeletionTimestamp != nil {
			return fmt.Errorf("the held copy is being deleted")
		}
		return nil
	})

	rm := startManager(t, env.Config, testOptions(ns))
	kubeenv.Eventually(t, 20*time.Second, func() error {
		cm, err := getLock(t, ns, "c1")
		if err != nil {
			return err
		}
		if _, ok := cm.Annotations[wire.MoveAnnotation]; ok {
			return fmt.Errorf("the copy still carries %s", wire.MoveAnnotation)
		}
		return nil
	})
	if err := env.Client.Delete(t.Context(), lock.DeepCopy()); !apierrors.IsForbidden(err) {
		t.Fatalf("delete of the copy once the manager took its mark off: %v, want forbidden", err)
	}
	eventOn(t, ns, "LockUnmarked", "Cluster", "c1")
	if n := rm.Counter.Of("configmaps", ns).Writes(); n != 1 {
		t.Fatalf("configmap writes = %d, want 1 (the mark taken off; the holder is awaited, not adopted for):\n%s", n, rm.Counter)
	}
}

// TestUnlockNotFoughtByTheManager: a holder's Unlock retires its grant,
// then marks the lock and deletes it. However long its delete takes to
// follow the mark (a client throttled, a slow network), the manager does
// not take that mark off: the register shows the holder releasing. Every
// Unlock completes the first time, and the lock is gone.
func TestUnlockNotFoughtByTheManager(t *testing.T) {
	ns := env.Namespace(t)
	startManager(t, env.Config, testOptions(ns))
	for _, delay := range []time.Duration{20 * time.Millisecond, 300 * time.Millisecond} {
		t.Run(delay.String(), func(t *testing.T) {
			ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
			defer cancel()
			base, err := client.NewWithWatch(env.Config, client.Options{Scheme: env.Client.Scheme()})
			if err != nil {
				t.Fatal(err)
			}
			slow := interceptor.NewClient(base, interceptor.Funcs{
				Delete: func(ctx context.Context, c client.WithWatch, obj client.Object, opts ...client.DeleteOption) error {
					if _, ok := obj.(*corev1.ConfigMap); ok {
						time.Sleep(delay) // between the mark and the delete
					}
					return c.Delete(ctx, obj, opts...)
				},
			})
			name := fmt.Sprintf("u%d", delay.Milliseconds())
			cl := createCluster(t, v, ns, name)
			m := createMachine(t, v, ns, name, name+"-cp-0")
			l := initlock.New(slow)
			for i := range 3 {
				if r, err := l.Lock(ctx, cl, m); err != nil || !r.Acquired {
					t.Fatalf("round %d: Lock: %+v, %v", i, r, err)
				}
				time.Sleep(200 * time.Millisecond) // the manager has seen the lock
				if err := l.Unlock(ctx, cl, m); err != nil {
					t.Fatalf("round %d: Unlock with %s between its mark and its delete: %v", i, delay, err)
				}
				if err := lockGone(t, ns, name)(); err != nil {
					t.Fatalf("round %d: after Unlock: %v", i, err)
				}
			}
		})
	}
}

// TestOperatorReleaseNotFought: kubectl initlock release --force marks a
// held lock and deletes it; the manager, which would take a mark left on
// a held lock off, leaves this one to the release under way, however long
// its delete takes to follow (a client throttled, a slow network).
func TestOperatorReleaseNotFought(t *testing.T) {
	ns := env.Namespace(t)
	cl := createCluster(t, v, ns, "c1")
	createMachine(t, v, ns, "c1", "c1-cp-0")
	create(t, lockFor(ns, "c1", "c1-cp-0", cl))
	startManager(t, env.Config, testOptions(ns))
	time.Sleep(time.Second) // the manager has seen the lock
	cm, err := getLock(t, ns, "c1")
	if err != nil {
		t.Fatal(err)
	}
	base, err := client.NewWithWatch(env.Config, client.Options{Scheme: env.Client.Scheme()})
	if err != nil {
		t.Fatal(err)
	}
	slow := interceptor.NewClient(base, interceptor.Funcs{
		Delete: func(ctx context.Context, c client.WithWatch, obj client.Object, opts ...client.DeleteOption) error {
			time.Sleep(300 * time.Millisecond) // between the mark and the delete
			return c.Delete(ctx, obj, opts...)
		},
	})
	st, err := keeper.Inspect(t.Context(), base, keeper.Query{Namespace: ns, Cluster: "c1", CAPIVersion: v, Release: true, Force: true})
	if err != nil || !st.Writes || st.LockUID != cm.UID {
		t.Fatalf("Inspect: %+v, %v", st, err)
	}
	if err := keeper.Release(t.Context(), slow, st); err != nil {
		t.Fatalf("release --force of a held lock with 300ms between its mark and its delete: %v", err)
	}
	if err := lockGone(t, ns, "c1")(); err != nil {
		t.Fatal(err)
	}
}

// TestStaleRegisterKeepsNoMark: a pkg/initlock lock held by c1-cp-1, whose
// Cluster's grant register went back to the release an earlier holder
// recorded (a Cluster restored from a backup taken between the two), and
// which carries a mark a delete would pass with: the manager takes the
// mark off all the same; nothing in the register vouches for a release
// under way.
func TestStaleRegisterKeepsNoMark(t *testing.T) {
	ns := env.Namespace(t)
	cl := createCluster(t, v, ns, "c1")
	m0 := createMachine(t, v, ns, "c1", "c1-cp-0")
	m1 := createMachine(t, v, ns, "c1", "c1-cp-1")
	l := initlock.New(env.Client)
	if r, err := l.Lock(t.Context(), cl, m0); err != nil || !r.Acquired {
		t.Fatalf("c1-cp-0's Lock: %+v, %v", r, err)
	}
	if err := l.Unlock(t.Context(), cl, m0); err != nil {
		t.Fatal(err)
	}
	released := getCluster(t, cl).GetAnnotations()[wire.GrantAnnotation]
	if r, err := l.Lock(t.Context(), getCluster(t, cl), m1); err != nil || !r.Acquired {
		t.Fatalf("c1-cp-1's Lock: %+v, %v", r, err)
	}
	back := fmt.Sprintf(`{"metadata":{"annotations":{%q:%q}}}`, wire.GrantAnnotation, released)
	if err := env.Client.Patch(t.Context(), getCluster(t, cl), client.RawPatch(types.MergePatchType, []byte(back))); err != nil {
		t.Fatal(err)
	}
	cm, err := getLock(t, ns, "c1")
	if err != nil {
		t.Fatal(err)
	}
	mark := fmt.Sprintf(`{"metadata":{"annotations":{%q:%q}}}`, wire.ReleaseAnnotation, cm.UID)
	if err := env.Client.Patch(t.Context(), cm, client.RawPatch(types.MergePatchType, []byte(mark))); err != nil {
		t.Fatal(err)
	}
	startManager(t, env.Config, testOptions(ns))
	kubeenv.Eventually(t, 20*time.Second, func() error {
		cm, err := getLock(t, ns, "c1")
		if err != nil {
			return err
		}
		if _, ok := cm.Annotations[wire.ReleaseAnnotation]; ok {
			return fmt.Errorf("the lock held for c1-cp-1 still carries its release mark")
		}
		return nil
	})
	if err := env.Client.Delete(t.Context(), cm.DeepCopy()); !apierrors.IsForbidden(err) {
		t.Fatalf("delete of c1-cp-1's lock once the manager took the mark off: %v, want forbidden", err)
	}
}

// TestReplayedMarkHeld: a release stopped between its mark and its delete
// left the mark on a held lock; a backup is taken; the manager takes the
// mark off. The Cluster is paused, and the backup is restored over the
// live objects with Velero's --existing-resource-policy=update (velerosim,
// checked against Velero in test/real): the live lock, the same object,
// gets the mark back. Neither a plain delete (stock CABPK's release) nor
// kubectl's nor the garbage collector's passes the lock guard: the mark
// lets a delete through only when the delete names the lock's current
// resourceVersion, which only a release that wrote the mark itself holds.
// Once the Cluster is unpaused, the manager takes the mark off again.
func TestReplayedMarkHeld(t *testing.T) {
	ctx := t.Context()
	ns := env.Namespace(t)
	cluster := createCluster(t, v, ns, "c1")
	createMachine(t, v, ns, "c1", "c1-cp-0")
	lock := lockFor(ns, "c1", "c1-cp-0", cluster)
	create(t, lock)
	marks := fmt.Sprintf(`{"metadata":{"annotations":{%q:%q,%q:"2026-12-06T10:00:00Z"}}}`,
		wire.ReleaseAnnotation, lock.UID, wire.ReleaseStartedAnnotation)
	if err := env.Client.Patch(ctx, lock, client.RawPatch(types.MergePatchType, []byte(marks))); err != nil {
		t.Fatal(err)
	}
	backup := &unstructured.Unstructured{}
	backup.SetGroupVersionKind(corev1.SchemeGroupVersion.WithKind("ConfigMap"))
	if err := env.Client.Get(ctx, client.ObjectKeyFromObject(lock), backup); err != nil {
		t.Fatal(err)
	}

	rm := startManager(t, env.Config, testOptions(ns))
	kubeenv.Eventually(t, 20*time.Second, func() error {
		cm, err := getLock(t, ns, "c1")
		if err != nil {
			return err
		}
		if _, ok := cm.Annotations[wire.ReleaseAnnotation]; ok {
			return fmt.Errorf("the lock still carries its release mark")
		}
		return nil
	})
	if err := env.Client.Patch(ctx, cluster, client.RawPatch(types.MergePatchType, []byte(`{"spec":{"paused":true}}`))); err != nil {
		t.Fatal(err)
	}
	kubeenv.Consistently(t, time.Second, func() error { return nil }) // the manager sees the pause
	restored, err := velerosim.NewForClient(env.Client, velerosim.Options{ExistingResourcePolicy: velerov1.PolicyTypeUpdate}).
		Restore(ctx, []*unstructured.Unstructured{backup})
	if err != nil {
		t.Fatalf("restoring the backup over the live lock: %v", err)
	}
	cm, err := getLock(t, ns, "c1")
	if err != nil {
		t.Fatal(err)
	}
	if cm.UID != lock.UID || cm.Annotations[wire.ReleaseAnnotation] != string(lock.UID) {
		t.Fatalf("the restore (%d objects) did not write the mark back over the live lock: uid %s (was %s), annotations %v",
			len(restored), cm.UID, lock.UID, cm.Annotations)
	}

	uid, rv := cm.UID, cm.ResourceVersion
	for _, d := range []struct {
		who  string
		opts []client.DeleteOption
	}{
		{"a plain delete (stock CABPK's release)", nil},
		{"kubectl delete", []client.DeleteOption{client.PropagationPolicy(metav1.DeletePropagationBackground)}},
		{"kubectl delete --dry-run=server", []client.DeleteOption{client.PropagationPolicy(metav1.DeletePropagationBackground), client.DryRunAll}},
		{"a delete naming the UID alone", []client.DeleteOption{client.Preconditions{UID: &uid}}},
		{"the garbage collector's delete", []client.DeleteOption{client.Preconditions{UID: &uid, ResourceVersion: &rv},
			client.PropagationPolicy(metav1.DeletePropagationBackground)}},
	} {
		if err := env.Client.Delete(ctx, cm.DeepCopy(), d.opts...); !apierrors.IsForbidden(err) {
			t.Fatalf("%s of the held lock whose mark a restore wrote back: %v, want forbidden", d.who, err)
		}
	}
	if n := rm.Counter.Of("configmaps", ns).Writes(); n != 1 {
		t.Fatalf("configmap writes = %d, want 1 (the mark taken off before the pause; none while paused):\n%s", n, rm.Counter)
	}

	if err := env.Client.Patch(ctx, cluster, client.RawPatch(types.MergePatchType, []byte(`{"spec":{"paused":null}}`))); err != nil {
		t.Fatal(err)
	}
	kubeenv.Eventually(t, 20*time.Second, func() error {
		cm, err := getLock(t, ns, "c1")
		if err != nil {
			return err
		}
		if _, ok := cm.Annotations[wire.ReleaseAnnotation]; ok {
			return fmt.Errorf("the lock still carries the mark the restore wrote back")
		}
		return nil
	})
	kubeenv.Eventually(t, 10*time.Second, namesHolder(t, ns, "c1", "c1-cp-0"))
}
