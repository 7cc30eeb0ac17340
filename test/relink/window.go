package relinksuite

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/watch"
	clocktesting "k8s.io/utils/clock/testing"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	"github.com/initlock/initlock/internal/kubeenv"
	"github.com/initlock/initlock/internal/relink"
	"github.com/initlock/initlock/pkg/initlock/capi"
)

// The window between an owner's confirming read and the patch that writes
// it: an owner deleted after its read is written only when the patch
// follows the read within relink.ConfirmFor, with no read of another batch
// between them (internal/relink, "What it does not do").

// configMapsOnly has the relinker watch ConfigMaps (and Clusters, always):
// Machines are owners of a kind it does not watch, read live only.
var configMapsOnly = []schema.GroupVersionKind{configMapGVK}

// patchLog records the relinker's patches, each with whether the owner a
// case deletes was deleted before it was sent.
type patchLog struct {
	mu      sync.Mutex
	deleted bool
	after   []string
	before  []string
}

func (l *patchLog) setDeleted() {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.deleted = true
}

func (l *patchLog) record(body string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.deleted {
		l.after = append(l.after, body)
	} else {
		l.before = append(l.before, body)
	}
}

// writtenAfter returns the patches sent after the deletion that name uid.
func (l *patchLog) writtenAfter(uid string) []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []string
	for _, p := range l.after {
		if strings.Contains(p, uid) {
			out = append(out, p)
		}
	}
	return out
}

// intercepted wraps the relinker's client: get runs around every read of
// a Machine (call sends it), and every patch is recorded in log.
func intercepted(log *patchLog, get func(name string, call func() error) error) func(client.Client) client.Client {
	return func(c client.Client) client.Client {
		return interceptor.NewClient(noWatch{c}, interceptor.Funcs{
			Get: func(ctx context.Context, c client.WithWatch, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
				call := func() error { return c.Get(ctx, key, obj, opts...) }
				if obj.GetObjectKind().GroupVersionKind().Kind != "Machine" {
					return call()
				}
				return get(key.Name, call)
			},
			Patch: func(ctx context.Context, c client.WithWatch, obj client.Object, patch client.Patch, opts ...client.PatchOption) error {
				body, err := patch.Data(obj)
				if err != nil {
					return err
				}
				log.record(string(body))
				return c.Patch(ctx, obj, patch, opts...)
			},
		})
	}
}

// noWatch lets interceptor wrap a client that does not watch.
type noWatch struct{ client.Client }

func (noWatch) Watch(context.Context, client.ObjectList, ...client.ListOption) (watch.Interface, error) {
	return nil, errors.New("watch is not served to the relinker's reconcile")
}

// deleteOwner deletes owner as a person does, with propagation policy p.
func (f *fixture) deleteOwner(owner *unstructured.Unstructured, p metav1.DeletionPropagation) {
	if err := f.c.Delete(context.Background(), owner, client.PropagationPolicy(p)); err != nil {
		f.t.Errorf("deleting %s %s: %v", owner.GetKind(), owner.GetName(), err)
	}
}

// keptAlive checks, where the garbage collector runs, that the object is
// not collected.
func (f *fixture) keptAlive(b Backend, gvk schema.GroupVersionKind, name string) {
	f.t.Helper()
	if !b.Collects {
		return
	}
	kubeenv.Consistently(f.t, 2*time.Second, func() error {
		u := &unstructured.Unstructured{}
		u.SetGroupVersionKind(gvk)
		return f.c.Get(f.t.Context(), client.ObjectKey{Namespace: f.ns, Name: name}, u)
	})
}

// caseClock is the relinker's clock in the cases: a fake clock that stands
// still unless a case moves it, by Step or SetTime, or right after the
// relinker next reads it (afterNextReading).
type caseClock struct {
	*clocktesting.FakeClock

	mu   sync.Mutex
	step time.Duration
	read chan struct{}
}

func newCaseClock() *caseClock {
	return &caseClock{FakeClock: clocktesting.NewFakeClock(time.Now())}
}

// afterNextReading has the clock move d forward right after the relinker
// next reads the time, and returns a channel closed then. Armed in the
// interceptor of a read before it returns, while nothing else of the
// relinker can read the clock, that next reading is the one by which the
// relinker notes the read answered: at the time before the step. Armed
// again before that reading, the steps add up.
func (c *caseClock) afterNextReading(d time.Duration) <-chan struct{} {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.read == nil {
		c.read = make(chan struct{})
	}
	c.step += d
	return c.read
}

// Now returns the time, then moves the clock as afterNextReading asked.
func (c *caseClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	now := c.FakeClock.Now()
	if c.read != nil {
		c.Step(c.step)
		close(c.read)
		c.step, c.read = 0, nil
	}
	return now
}

// waitLimit bounds a case's wait for a step of the relinker: one that
// never comes fails the case instead of hanging it. It is shorter than
// the relinker's bound on one live read (30 s), so that a read waiting
// in its interceptor is still answered.
const waitLimit = 20 * time.Second

// waitFor waits until ch is closed, or fails the case after waitLimit.
func waitFor(t *testing.T, ch <-chan struct{}, what string) {
	select {
	case <-ch:
	case <-time.After(waitLimit):
		t.Errorf("not within %s: %s", waitLimit, what)
	}
}

// deletedWhileAnotherIsRead: a restored ConfigMap records two Machines,
// owners of a kind the relinker does not watch: m-0, restored by the same
// restore, and m-gone, not back. The two reads go out together: m-0's is
// answered first (its interceptor waits for m-gone's read to be sent), and
// m-0 is deleted right after; m-gone's read is slow: its interceptor
// waits for the relinker to note m-0's answer, then steps the relinker's
// clock by 2×ConfirmFor. Once both are answered, m-0's answer is older
// than ConfirmFor: it is read again, found gone, and not written. The
// ConfigMap waits, unlinked and whole (written, m-0's UID would have the
// garbage collector delete it: its only owner is gone).
func deletedWhileAnotherIsRead(t *testing.T, b Backend) {
	log := &patchLog{}
	var (
		f                  *fixture
		owner              *unstructured.Unstructured
		zeroRead, goneRead atomic.Bool
		goneSent           = make(chan struct{})
		zeroNoted          = make(chan (<-chan struct{}), 1)
	)
	get := func(name string, call func() error) error {
		switch {
		case name == "m-0" && !zeroRead.Swap(true):
			waitFor(t, goneSent, "m-gone's read sent while m-0's is in flight (the reads of a batch go out together)")
			err := call()
			if err == nil {
				f.deleteOwner(owner, metav1.DeletePropagationBackground)
				log.setDeleted()
			}
			zeroNoted <- f.clock.afterNextReading(0)
			return err
		case name == "m-gone" && !goneRead.Swap(true):
			close(goneSent)
			select {
			case noted := <-zeroNoted:
				waitFor(t, noted, "the relinker noting m-0's answer")
			case <-time.After(waitLimit):
				t.Errorf("not within %s: m-0's read answered", waitLimit)
			}
			f.clock.Step(2 * relink.ConfirmFor)
		}
		return call()
	}
	f = newFixtureWith(t, b, relink.Options{Kinds: configMapsOnly}, intercepted(log, get))
	owner = f.restore(backedUp(kubeenv.NewMachine(capi.V1Beta2, f.ns, "c1", "m-0")))
	f.restore(backedUp(configMap(f.ns, "m-0-data", "c1"), oldRef(machineGVK, "m-0", false), oldRef(machineGVK, "m-gone", false)))

	wantResult(t, f.reconciled(configMapGVK, "m-0-data"), ctrl.Result{RequeueAfter: time.Second})
	if got := log.writtenAfter(string(owner.GetUID())); len(got) > 0 {
		t.Errorf("patched the deleted owner m-0 in: %v", got)
	}
	// m-0 read twice: found, then, its answer too old once m-gone's came,
	// found gone. No patch.
	f.wantRequests(map[string]int{
		"get configmaps/m-0-data 200": 1, "get clusters/c1 404": 1,
		"get machines/m-0 200": 1, "get machines/m-0 404": 1, "get machines/m-gone 404": 1, "delete machines/m-0 200": 1,
	})
	f.keptAlive(b, configMapGVK, "m-0-data")
	f.wantUnlinked(configMapGVK, "m-0-data")
	f.wantWaiting(configMapGK, "m-0-data")
}

// manyOwnersNotWatched: a restored ConfigMap records 1,000 Machines, of a
// kind the relinker does not watch: m-000, restored by the same restore,
// and 999 that are not back. The relinker reads them in batches, each
// batch's reads sent together and its references patched before the next
// batch is read: m-000 is linked by the first batch's patch. When the
// relinker reads the 100th Machine, m-000 is deleted, orphaning its
// dependents: no patch sent after that names it, and the ConfigMap is
// orphaned, not collected. The relinker's clock stands still: no answer
// is ever ConfirmFor old, so no owner is read again, however long the
// reads take on the machine running the case. (Read one after the other
// with one patch at the end, m-000 was written after its deletion, a
// second and 999 reads after its read, and the garbage collector deleted
// the ConfigMap.)
func manyOwnersNotWatched(t *testing.T, b Backend) {
	const n, deleteAt = 1000, 100
	log := &patchLog{}
	var (
		f     *fixture
		owner *unstructured.Unstructured
		mu    sync.Mutex
		reads int
	)
	get := func(_ string, call func() error) error {
		mu.Lock()
		reads++
		now := reads == deleteAt
		mu.Unlock()
		if now {
			f.deleteOwner(owner, metav1.DeletePropagationOrphan)
			log.setDeleted()
		}
		return call()
	}
	f = newFixtureWith(t, b, relink.Options{Kinds: configMapsOnly}, intercepted(log, get))
	owner = f.restore(backedUp(kubeenv.NewMachine(capi.V1Beta2, f.ns, "c1", "m-000")))
	refs := make([]metav1.OwnerReference, n)
	want := map[string]int{
		"get configmaps/many 200": 1, "get clusters/c1 404": 1, "get machines/m-000 200": 1,
		"patch configmaps/many 200": 1, "delete machines/m-000 200": 1,
	}
	for i := range n {
		name := fmt.Sprintf("m-%03d", i)
		refs[i] = oldRef(machineGVK, name, false)
		if i > 0 {
			want["get machines/"+name+" 404"] = 1
		}
	}
	f.restore(backedUp(configMap(f.ns, "many", "c1"), refs...))

	wantResult(t, f.reconciled(configMapGVK, "many"), ctrl.Result{RequeueAfter: time.Second})
	if got := log.writtenAfter(string(owner.GetUID())); len(got) > 0 {
		t.Errorf("patched the deleted owner m-000 after its deletion: %d patches", len(got))
	}
	if len(log.before) != 1 || !strings.Contains(log.before[0], string(owner.GetUID())) {
		t.Errorf("patches before m-000 was deleted: %v, want one linking it", log.before)
	}
	f.wantRequests(want)
	f.keptAlive(b, configMapGVK, "many")
	linked := []metav1.OwnerReference{refTo(owner, false)}
	if b.Collects {
		// The garbage collector orphans it: takes the reference off.
		kubeenv.Eventually(t, 10*time.Second, func() error {
			if refs := f.get(configMapGVK, "many").GetOwnerReferences(); len(refs) > 0 {
				return fmt.Errorf("not orphaned: %v", refs)
			}
			return nil
		})
		linked = nil
	}
	if got, want := refStrings(f.get(configMapGVK, "many").GetOwnerReferences()), refStrings(linked); fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("ownerReferences = %v, want %v", got, want)
	}
	f.wantWaiting(configMapGK, "many")
}

// notConfirmed: a restored ConfigMap records a Machine restored by the
// same restore, m-0, whose every read the relinker finds ConfirmFor old
// (its interceptor has the relinker's clock step by 2×ConfirmFor right
// after the relinker notes the answer: a process stalled between the
// answer and the patch). The relinker reads m-0 three times, then gives
// up with ErrOwnersNotConfirmed: no patch, and the ConfigMap stays as it
// was, tried again with the controller's backoff (it does not wait for an
// owner).
func notConfirmed(t *testing.T, b Backend) {
	log := &patchLog{}
	var f *fixture
	get := func(_ string, call func() error) error {
		err := call()
		f.clock.afterNextReading(2 * relink.ConfirmFor)
		return err
	}
	f = newFixtureWith(t, b, relink.Options{Kinds: configMapsOnly}, intercepted(log, get))
	f.restore(backedUp(kubeenv.NewMachine(capi.V1Beta2, f.ns, "c1", "m-0")))
	f.restore(backedUp(configMap(f.ns, "m-0-data", "c1"), oldRef(machineGVK, "m-0", false)))

	if _, err := f.reconcile(configMapGVK, "m-0-data"); !errors.Is(err, relink.ErrOwnersNotConfirmed) {
		t.Errorf("Reconcile = %v, want %v", err, relink.ErrOwnersNotConfirmed)
	}
	if len(log.before) > 0 || len(log.after) > 0 {
		t.Errorf("patched: %v", append(log.before, log.after...))
	}
	f.wantRequests(map[string]int{
		"get configmaps/m-0-data 200": 1, "get clusters/c1 404": 1, "get machines/m-0 200": 3,
	})
	f.wantUnlinked(configMapGVK, "m-0-data")
	f.wantWaiting(configMapGK)
}
