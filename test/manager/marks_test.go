package managersuite_test

import (
	"cmp"
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
	kubeenv.Consistently(t, 2*time.Second, noWrites(rm, "", ""))
	setPaused(t, cluster, false)
	kubeenv.Eventually(t, 20*time.Second, lockIs(t, ns, "c1", func(cm *corev1.ConfigMap) error {
		return cmp.Or(unmarked(wire.ReleaseAnnotation, wire.MoveAnnotation)(cm), holds("c1-cp-0")(cm))
	}))
	if err := env.Client.Delete(t.Context(), lock.DeepCopy()); !apierrors.IsForbidden(err) {
		t.Fatalf("delete of the lock once the manager took its marks off: %v, want forbidden", err)
	}
	kubeenv.Consistently(t, time.Second, func() error { return nil })
	wantWrites(t, rm, "configmaps", ns, 1, "(the marks taken off)")
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
	// The collector's turn, the manager down: the held copy stays.
	kubeenv.Consistently(t, 4*time.Second, lockIs(t, ns, "c1", func(cm *corev1.ConfigMap) error {
		if cm.DeletionTimestamp != nil {
			return fmt.Errorf("the held copy is being deleted")
		}
		return nil
	}))

	rm := startManager(t, env.Config, testOptions(ns))
	kubeenv.Eventually(t, 20*time.Second, lockIs(t, ns, "c1", unmarked(wire.MoveAnnotation)))
	if err := env.Client.Delete(t.Context(), lock.DeepCopy()); !apierrors.IsForbidden(err) {
		t.Fatalf("delete of the copy once the manager took its mark off: %v, want forbidden", err)
	}
	eventOn(t, ns, "LockUnmarked", "Cluster", "c1")
	wantWrites(t, rm, "configmaps", ns, 1, "(the mark taken off; the holder is awaited, not adopted for)")
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
			slow := slowDeletes(t, delay)
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
	st, err := keeper.Inspect(t.Context(), env.Client, keeper.Query{Namespace: ns, Cluster: "c1", CAPIVersion: v, Release: true, Force: true})
	if err != nil || !st.Writes || st.LockUID != cm.UID {
		t.Fatalf("Inspect: %+v, %v", st, err)
	}
	if err := keeper.Release(t.Context(), slowDeletes(t, 300*time.Millisecond), st); err != nil {
		t.Fatalf("release --force of a held lock with 300ms between its mark and its delete: %v", err)
	}
	if err := lockGone(t, ns, "c1")(); err != nil {
		t.Fatal(err)
	}
}

// slowDeletes is a client of the Env that waits delay before each delete
// of a ConfigMap: between a release's mark and its delete.
func slowDeletes(t *testing.T, delay time.Duration) client.WithWatch {
	t.Helper()
	base, err := client.NewWithWatch(env.Config, client.Options{Scheme: env.Client.Scheme()})
	if err != nil {
		t.Fatal(err)
	}
	return interceptor.NewClient(base, interceptor.Funcs{
		Delete: func(ctx context.Context, c client.WithWatch, obj client.Object, opts ...client.DeleteOption) error {
			if _, ok := obj.(*corev1.ConfigMap); ok {
				time.Sleep(delay)
			}
			return c.Delete(ctx, obj, opts...)
		},
	})
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
	kubeenv.Eventually(t, 20*time.Second, lockIs(t, ns, "c1", unmarked(wire.ReleaseAnnotation)))
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
	kubeenv.Eventually(t, 20*time.Second, lockIs(t, ns, "c1", unmarked(wire.ReleaseAnnotation)))
	setPaused(t, cluster, true)
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
	wantWrites(t, rm, "configmaps", ns, 1, "(the mark taken off before the pause; none while paused)")

	setPaused(t, cluster, false)
	kubeenv.Eventually(t, 20*time.Second, lockIs(t, ns, "c1", unmarked(wire.ReleaseAnnotation)))
	kubeenv.Eventually(t, 10*time.Second, lockIs(t, ns, "c1", holds("c1-cp-0")))
}

// setPaused sets or clears cluster's spec.paused with a merge patch.
func setPaused(t *testing.T, cluster *unstructured.Unstructured, paused bool) {
	t.Helper()
	patch := `{"spec":{"paused":null}}`
	if paused {
		patch = `{"spec":{"paused":true}}`
	}
	if err := env.Client.Patch(t.Context(), cluster, client.RawPatch(types.MergePatchType, []byte(patch))); err != nil {
		t.Fatal(err)
	}
}
