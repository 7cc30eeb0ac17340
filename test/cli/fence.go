package clisuite

import (
	"context"
	"fmt"
	"io"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/clock"
	testingclock "k8s.io/utils/clock/testing"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/initlock/initlock/internal/cli"
	"github.com/initlock/initlock/internal/kubeenv"
	"github.com/initlock/initlock/internal/kubeenv/wire"
	"github.com/initlock/initlock/pkg/initlock"
	"github.com/initlock/initlock/pkg/initlock/keeper"
)

// pastGrace is a clock the default grace period ahead, and a minute more:
// the fleet's locks are older than the grace period, so that the lock of a
// gone holder is released rather than left for a restore to bring the
// holder back.
func pastGrace() clock.PassiveClock {
	return testingclock.NewFakePassiveClock(time.Now().Add(keeper.DefaultPolicy().OrphanGrace + time.Minute))
}

// A lock whose holder is gone and that is younger than the grace period
// waits: a restore may bring the Cluster and the lock back before the
// Machines.
func repairWaitsForARestoredHolder(t *testing.T, b *Backend) {
	ns := b.Namespace(t)
	cl := b.newCluster(t, ns, "c1", false)
	b.newLock(t, ns, "c1", "m-gone", cl)
	var c kubeenv.Counter
	b.run(t, invocation{counter: &c}, "repair", "-n", ns, "--yes").ExpectCode(t, cli.ExitOK).OutHas(t, "younger than the grace period")
	expectN(t, "writes of the repair of a young lock of a gone holder", c.Writes(), 0)
	r := b.run(t, invocation{clock: pastGrace(), counter: &c}, "repair", "-n", ns, "--yes").ExpectCode(t, cli.ExitOK)
	expectN(t, "writes past the grace period (the release mark, the delete)", c.Writes(), 2)
	b.expectLock(t, ns, false, r)
}

// repairTakesLeftMarksOff: a release mark or clusterctl move's
// delete-for-move left on a lock whose holder exists lets the lock guard
// pass any delete of it; list shows it, and repair takes it off in one
// write (an adoption), after which the guard holds the lock again.
func repairTakesLeftMarksOff(t *testing.T, b *Backend) {
	for _, tc := range []struct{ key, protection string }{
		{wire.ReleaseAnnotation, "releasable"},
		{wire.MoveAnnotation, "moving"},
	} {
		t.Run(tc.protection, func(t *testing.T) {
			ns := b.Namespace(t)
			b.held(t, ns, "c1", false)
			lock := kubeenv.MustGetLock(t, b.Client, ns, "c1")
			value := ""
			if tc.key == wire.ReleaseAnnotation {
				value = string(lock.UID)
			}
			mark := fmt.Sprintf(`{"metadata":{"annotations":{%q:%q}}}`, tc.key, value)
			if err := b.Client.Patch(t.Context(), lock, client.RawPatch(types.MergePatchType, []byte(mark))); err != nil {
				t.Fatal(err)
			}
			b.run(t, invocation{}, "list", "-n", ns).ExpectCode(t, cli.ExitOK).OutHas(t, " "+tc.protection+" ")
			var c kubeenv.Counter
			b.run(t, invocation{counter: &c}, "repair", "-n", ns, "--yes").ExpectCode(t, cli.ExitOK).OutHas(t, "so that the lock guard holds the lock again")
			expectN(t, "writes (the adoption)", c.Writes(), 1)
			after := kubeenv.MustGetLock(t, b.Client, ns, "c1")
			if _, ok := after.Annotations[tc.key]; ok || after.UID != lock.UID {
				t.Fatalf("after repair the lock is %s with annotations %v: want the same lock without %s", after.UID, after.Annotations, tc.key)
			}
		})
	}
}

// answerAfter is an operator's answer typed once before has run: what
// happened while the question waited.
type answerAfter struct {
	before func()
	answer io.Reader
}

func (a *answerAfter) Read(p []byte) (int, error) {
	if a.before != nil {
		a.before()
		a.before = nil
	}
	return a.answer.Read(p)
}

// releaseReadsAgainAfterTheAnswer: release asks before it acts, and
// the answer may come long after its reading. A holder Machine restored
// while the question waits makes the release one that needs --force: the
// answer "y" to the question asked releases nothing.
func releaseReadsAgainAfterTheAnswer(t *testing.T, b *Backend) {
	ns := b.Namespace(t)
	cl := b.newCluster(t, ns, "c1", false)
	b.newLock(t, ns, "c1", "m0", cl)
	in := &answerAfter{before: func() { b.newMachine(t, ns, "c1", "m0", nil) }, answer: strings.NewReader("y\n")}
	var c kubeenv.Counter
	r := b.run(t, invocation{in: in, counter: &c}, "release", "c1", "-n", ns).ExpectCode(t, cli.ExitError)
	r.ErrHas(t, "changed while you were asked")
	expectN(t, "writes of the release answered y after the holder came back", c.Writes(), 0)
	b.expectLock(t, ns, true, r)
}

// releaseLeavesALockMadeSince: a release ends with the lock it inspected.
// Released by someone else while the release runs (its mark loses the
// race), and followed by another Machine's lock, created anew or taken
// over, it leaves that lock and its grant alone.
func releaseLeavesALockMadeSince(t *testing.T, b *Backend) {
	for _, tt := range []struct {
		name    string
		replace func(ctx context.Context, c client.Client, cm *corev1.ConfigMap, cl, m2 *unstructured.Unstructured) error
		granted string
	}{
		{"created by a stock provider", func(ctx context.Context, c client.Client, cm *corev1.ConfigMap, cl, _ *unstructured.Unstructured) error {
			if err := kubeenv.ReleaseLock(ctx, c, cm); err != nil {
				return err
			}
			return c.Create(ctx, kubeenv.NewLock(cm.Namespace, "c1", "m2", cl))
		}, ""},
		{"taken over by initlock's Lock", func(ctx context.Context, c client.Client, _ *corev1.ConfigMap, cl, m2 *unstructured.Unstructured) error {
			res, err := initlock.New(c).Lock(ctx, cl, m2)
			if err == nil && !res.Acquired {
				err = fmt.Errorf("m2 refused: %+v", res)
			}
			return err
		}, "m2"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			ns := b.Namespace(t)
			cl := b.newCluster(t, ns, "c1", false)
			b.newLock(t, ns, "c1", "m1", cl) // m1 is gone: no --force needed
			m2 := b.newMachine(t, ns, "c1", "m2", nil)
			replace := func(ctx context.Context, c client.Client, cm *corev1.ConfigMap) error {
				return tt.replace(ctx, c, cm, b.getCluster(t, cl), m2)
			}
			r := b.run(t, invocation{before: b.interfere(t, "patch", ns, "c1", 1, replace)}, "release", "c1", "-n", ns, "--yes").ExpectCode(t, cli.ExitOK)
			b.expectLock(t, ns, true, r) // m2's, made while the release ran
			r.OutHas(t, `was replaced while releasing it; the lock that stands now names "m2" and was left alone`)
			cm := kubeenv.MustGetLock(t, b.Client, ns, "c1")
			if rec, err := wire.DecodeRecord(cm.Data[wire.DataKey]); err != nil || rec.MachineName != "m2" {
				t.Errorf("lock record %+v, %v; want m2's", rec, err)
			}
			if got := b.grantOf(t, cl); got != tt.granted {
				t.Errorf("grant register names %q, want %q", got, tt.granted)
			}
		})
	}
}

// releaseStopsForAHolderBack: a release without --force reads the holder
// again once it has marked the lock, before its delete. The holder Machine
// restored just before the mark keeps its lock: the release stops, refused,
// and takes its mark off again.
func releaseStopsForAHolderBack(t *testing.T, b *Backend) {
	ns := b.Namespace(t)
	cl := b.newCluster(t, ns, "c1", false)
	b.newLock(t, ns, "c1", "m1", cl) // m1 is gone: no --force needed
	restore := func(ctx context.Context, c client.Client, _ *corev1.ConfigMap) error {
		return c.Create(ctx, kubeenv.NewMachine(b.CAPIVersion, ns, "c1", "m1"))
	}
	var c kubeenv.Counter
	r := b.run(t, invocation{counter: &c, before: b.interfere(t, "patch", ns, "c1", 1, restore)}, "release", "c1", "-n", ns, "--yes").ExpectCode(t, cli.ExitError)
	b.expectLock(t, ns, true, r) // m1's, restored while the release ran
	cm := kubeenv.MustGetLock(t, b.Client, ns, "c1")
	if _, marked := cm.Annotations[wire.ReleaseAnnotation]; marked {
		t.Errorf("the release mark was left on the lock: %v", cm.Annotations)
	}
	r.ErrHas(t, "a Machine it names came back while releasing it", "machine m1, which it names, exists")
	expectN(t, "writes (the mark, then its removal)", c.Writes(), 2)
}

// repairConfirmsAfterTheAnswer: repair plans the release of a gone
// holder's lock and asks; the holder Machine restored while the question
// waits changes the decision on the live read that precedes each write, so
// repair writes nothing and says that a Machine may have changed, not only
// the Cluster.
func repairConfirmsAfterTheAnswer(t *testing.T, b *Backend) {
	ns := b.Namespace(t)
	cl := b.newCluster(t, ns, "c1", false)
	b.newLock(t, ns, "c1", "m0", cl)
	in := &answerAfter{before: func() { b.newMachine(t, ns, "c1", "m0", nil) }, answer: strings.NewReader("y\n")}
	var c kubeenv.Counter
	r := b.run(t, invocation{in: in, clock: pastGrace(), counter: &c}, "repair", "-n", ns).ExpectCode(t, cli.ExitOK)
	r.OutHas(t, "the Cluster or its Machines had changed; now healthy, nothing to do")
	expectN(t, "writes of the repair answered y after the holder came back", c.Writes(), 0)
	b.expectLock(t, ns, true, r)
}
