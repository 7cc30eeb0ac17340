package library_test

import (
	"errors"
	"math/rand/v2"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/initlock/initlock/internal/kubeenv"
	"github.com/initlock/initlock/internal/kubeenv/velerosim"
	"github.com/initlock/initlock/pkg/initlock"
	"github.com/initlock/initlock/pkg/initlock/capi"
)

// backup backs up the namespace's Clusters, Machines and ConfigMaps as a
// Velero backup holds them (velerosim).
func (f *fixture) backup() []*unstructured.Unstructured {
	f.t.Helper()
	objs, err := velerosim.Backup(f.ctx(), env.Client, f.ns, corev1.SchemeGroupVersion.WithKind("ConfigMap"),
		capi.MachineGVK(capi.V1Beta2), capi.ClusterGVK(capi.V1Beta2))
	if err != nil {
		f.t.Fatal(err)
	}
	return objs
}

// deleteAll deletes the backed-up objects and waits until they are gone.
func (f *fixture) deleteAll(objs []*unstructured.Unstructured) {
	f.t.Helper()
	del := make([]client.Object, len(objs))
	for i, o := range objs {
		del[i] = o.DeepCopy()
	}
	kubeenv.DeleteAndWait(f.t, env.Client, del...)
}

// restore restores the objects as a Velero restore does (velerosim: its
// order, metadata reset, ownerReferences and status dropped), keyed by
// "Kind/name".
func (f *fixture) restore(objs []*unstructured.Unstructured) map[string]*unstructured.Unstructured {
	f.t.Helper()
	out := map[string]*unstructured.Unstructured{}
	for _, o := range velerosim.Restore(f.t, env.Config, velerosim.Options{}, objs...) {
		out[o.GetKind()+"/"+o.GetName()] = o
	}
	return out
}

// TestSeedScenario is the reported bug at library level: after a Velero
// backup, delete and restore, the holder's next Lock finds its grant and
// its lock by name (everything has new UIDs), writes both again for the
// restored Cluster and Machine, and the garbage collector then removes the
// lock with the Cluster.
func TestSeedScenario(t *testing.T) {
	f := newFixture(t)
	f.mustLock(f.machine("m1"))
	oldUID := f.cluster.GetUID()

	objs := f.backup()
	f.deleteAll(objs)
	restored := f.restore(objs)
	f.cluster = restored["Cluster/c1"]
	if f.cluster.GetUID() == oldUID {
		t.Fatal("restored cluster kept its UID")
	}
	if refs := f.lockCM().OwnerReferences; len(refs) != 0 {
		t.Fatalf("restored lock has ownerReferences %+v; a Velero restore strips them", refs)
	}
	// Before the holder comes back, the restored grant still protects it.
	if res := f.mustLock(f.machine("m2")); res.Acquired || res.Holder != "m1" {
		t.Fatalf("Lock(m2) after the restore = %+v, want refused: m1 holds it", res)
	}

	f.counter.Reset()
	res := f.mustLock(restored["Machine/m1"])
	if !res.Acquired || res.Action != "take-over" {
		t.Fatalf("Lock after restore = %+v, want acquired, its records written again", res)
	}
	// GET lock ∥ GET Cluster ∥ GET caller; GET caller again, after the
	// Cluster (the register names it by name only: a caller object from
	// before the restore must not replace that grant); PATCH register;
	// PATCH lock.
	f.counts(t, "the holder's Lock after the restore", 4, 2)
	if refs := f.lockCM().OwnerReferences; len(refs) != 1 || refs[0].UID != f.cluster.GetUID() {
		t.Fatalf("lock ownerReferences = %+v, want the restored cluster's UID %s", refs, f.cluster.GetUID())
	}
	f.expectHeld(t, "m1")

	if err := env.Client.Delete(t.Context(), f.cluster); err != nil {
		t.Fatal(err)
	}
	kubeenv.Eventually(t, 10*time.Second, kubeenv.LockGone(t.Context(), env.Client, f.ns, "c1"))
}

// TestLostLock covers the lock ConfigMap disappearing while held: a second
// machine is refused while the first holder exists, the cluster is not
// initialised and the grant was not released.
func TestLostLock(t *testing.T) {
	t.Run("restore with stale owner UIDs: collected, refused, recreated", func(t *testing.T) {
		f, m1, m2, _, cm := newFixtureWithLostLock(t)
		// A naive re-apply of a backup keeps the ownerReference with a UID
		// that no longer exists; the garbage collector then deletes it.
		stale := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: f.ns, Name: cm.Name, Labels: cm.Labels,
			OwnerReferences: []metav1.OwnerReference{{APIVersion: f.cluster.GetAPIVersion(), Kind: "Cluster", Name: "c1", UID: "0ld0ld00-0000-0000-0000-000000000000"}}},
			Data: cm.Data}
		if err := env.Client.Create(t.Context(), stale); err != nil {
			t.Fatal(err)
		}
		kubeenv.Eventually(t, 10*time.Second, kubeenv.LockGone(t.Context(), env.Client, f.ns, "c1"))
		f.checkRefusedThenHolderRecreates(t, m1, m2)
	})
	t.Run("kubectl delete of a held lock", func(t *testing.T) {
		f, m1, m2, _, _ := newFixtureWithLostLock(t)
		f.checkRefusedThenHolderRecreates(t, m1, m2)
	})
	t.Run("lock lost and the caller's view of the register stale: refused at once, the next call recreates it for the holder", func(t *testing.T) {
		f, m1, m2, stale, _ := newFixtureWithLostLock(t)
		f.counter.Reset()
		res, err := f.locker.Lock(t.Context(), stale, m2)
		if err != nil || res.Acquired || res.Holder != "" || res.Recreated || res.RetryAfter != 30*time.Second {
			t.Fatalf("Lock(m2) with a stale view = %+v, %v; want refused at once, RetryAfter %s", res, err, 30*time.Second)
		}
		// PATCH register (fails its test: m1's grant) ∥ GET caller, and
		// nothing else: the lock is not looked at.
		f.counts(t, "refused Lock", 1, 1)
		if kubeenv.MustGetLock(f.t, env.Client, f.ns, "c1") != nil {
			t.Fatal("a refused call wrote the lock")
		}
		// The next call, with the Cluster as it stands, reads the lock.
		res, err = f.locker.Lock(t.Context(), f.get(f.cluster), m2)
		if err != nil || res.Acquired || res.Holder != "m1" || !res.Recreated || res.RetryAfter != 30*time.Second {
			t.Fatalf("Lock(m2) = %+v, %v; want refused, RetryAfter %s, and the lock recreated for m1", res, err, 30*time.Second)
		}
		// GET lock ∥ GET Cluster ∥ GET caller; GET m1; CREATE lock for m1.
		f.counts(t, "refused Lock", 4, 1)
		if h := f.lockHolder(); h != "m1" {
			t.Errorf("lock holder = %s, want m1", h)
		}
		f.expectGrant(t, "m1")
		if res := f.mustLock(m1); !res.Acquired || res.Holder != "m1" || res.RetryAfter != 0 {
			t.Fatalf("Lock(m1) = %+v, want acquired, no RetryAfter", res)
		}
		f.expectHeld(t, "m1")
	})
	t.Run("holder machine deleted and lock deleted: another machine acquires", func(t *testing.T) {
		f, m1, m2, _, _ := newFixtureWithLostLock(t)
		kubeenv.DeleteAndWait(t, env.Client, m1)
		if res := f.mustLock(m2); !res.Acquired || res.Action != "create" {
			t.Fatalf("Lock(m2) = %+v, want acquired by create", res)
		}
	})
}

// newFixtureWithLostLock returns a fixture with Machines m1 and m2 whose
// lock, granted to m1, was deleted (as kubectl deletes it), the Cluster as
// it was read before m1's grant, and the lock as it was.
func newFixtureWithLostLock(t *testing.T) (f *fixture, m1, m2, before *unstructured.Unstructured, lost *corev1.ConfigMap) {
	f = newFixture(t)
	m1, m2 = f.machine("m1"), f.machine("m2")
	before = f.cluster.DeepCopy()
	f.mustLock(m1)
	lost = f.lockCM()
	if err := env.Client.Delete(t.Context(), lost); err != nil {
		t.Fatal(err)
	}
	return f, m1, m2, before, lost
}

// checkRefusedThenHolderRecreates: with the lock gone, m2 is refused and the
// lock is recreated for m1, then m1's Lock writes both records again with
// one token, and its next one writes nothing.
func (f *fixture) checkRefusedThenHolderRecreates(t *testing.T, m1, m2 *unstructured.Unstructured) {
	t.Helper()
	f.counter.Reset()
	res := f.mustLock(m2)
	if res.Acquired || res.Holder != "m1" || !res.Recreated {
		t.Fatalf("Lock(m2) with the lock lost = %+v, want refused and recreated for m1", res)
	}
	// m2's view of the Cluster shows m1's grant: GET lock (404) ∥ GET
	// Cluster ∥ GET caller; GET m1; CREATE lock for m1. m2 records no grant.
	f.counts(t, "refused Lock", 4, 1)
	if h := f.lockHolder(); h != "m1" {
		t.Fatalf("lock holder = %s, want m1", h)
	}
	if refs := f.lockCM().OwnerReferences; len(refs) != 1 || refs[0] != f.clusterRef() {
		t.Errorf("recreated lock ownerReferences = %+v, want the cluster", refs)
	}
	f.expectGrant(t, "m1")
	// The recreated record carries no token: m1 relies on it only once it
	// has written the register and the lock again, with one token.
	if res := f.mustLock(m1); !res.Acquired || res.Holder != "m1" || res.Action != "take-over" {
		t.Fatalf("Lock(m1) = %+v, want acquired, the records written again", res)
	}
	// GET lock ∥ GET Cluster ∥ GET caller; PATCH register ∥ GET caller
	// (after the Cluster); PATCH lock.
	f.counts(t, "holder's Lock after recreation", 4, 2)
	f.expectHeld(t, "m1")
	if res := f.mustLock(m1); !res.Acquired || res.Action != "none" {
		t.Fatalf("Lock(m1) again = %+v, want acquired with no action", res)
	}
	f.counts(t, "holder's next Lock", 3, 0)
}

// TestConcurrentLock: 50 machines race for the lock of a fresh cluster in
// each of 20 rounds; each round has exactly one winner. In the second half
// the lock is also deleted at random moments during the round.
func TestConcurrentLock(t *testing.T) {
	if testing.Short() {
		t.Skip("50 x 20 racing Locks")
	}
	const machines, rounds = 50, 20
	for _, deleting := range []bool{false, true} {
		name := "contention"
		if deleting {
			name = "contention with the lock deleted at random"
		}
		t.Run(name, func(t *testing.T) {
			f := newFixture(t)
			rng := rand.New(rand.NewPCG(1, 2))
			totalRecreated := 0
			defer func() {
				t.Logf("%d rounds, %d refused Locks found the lock lost and gave it back to its granted holder", rounds, totalRecreated)
			}()
			for round := range rounds {
				c := f.create(kubeenv.NewCluster(capi.V1Beta2, f.ns, "r"+strconv.Itoa(round)))
				ms := make([]*unstructured.Unstructured, machines)
				for i := range ms {
					ms[i] = f.create(kubeenv.NewMachine(capi.V1Beta2, f.ns, c.GetName(), c.GetName()+"-m"+strconv.Itoa(i)))
				}
				var winners sync.Map
				var wins, recreated atomic.Int32
				stop := make(chan struct{})
				var deleter sync.WaitGroup
				if deleting {
					deleter.Go(func() {
						for {
							select {
							case <-stop:
								return
							case <-time.After(time.Duration(rng.IntN(5)) * time.Millisecond):
							}
							cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: f.ns, Name: c.GetName() + "-lock"}}
							_ = env.Client.Delete(t.Context(), cm)
						}
					})
				}
				var wg sync.WaitGroup
				for _, m := range ms {
					wg.Go(func() {
						// Each call has its own copy of the Cluster, as
						// each reconcile of a controller has.
						res, err := f.locker.Lock(t.Context(), c.DeepCopy(), m)
						if err != nil && !errors.Is(err, initlock.ErrContended) {
							t.Errorf("Lock(%s): %v", m.GetName(), err)
							return
						}
						if res.Acquired {
							wins.Add(1)
							winners.Store(m.GetName(), true)
						}
						if res.Recreated {
							recreated.Add(1)
						}
					})
				}
				wg.Wait()
				close(stop)
				deleter.Wait()
				// Settle: every machine asks once more, sequentially. The
				// set of machines ever granted the lock must be one.
				for _, m := range ms {
					res, err := f.locker.Lock(t.Context(), f.get(c), m)
					if err != nil {
						t.Fatalf("round %d: settling Lock(%s): %v", round, m.GetName(), err)
					}
					if res.Acquired {
						winners.Store(m.GetName(), true)
					}
				}
				var names []string
				winners.Range(func(k, _ any) bool { names = append(names, k.(string)); return true })
				if len(names) != 1 {
					t.Fatalf("round %d: machines granted the lock: %v, want exactly one", round, names)
				}
				totalRecreated += int(recreated.Load())
				if !deleting && wins.Load() != 1 {
					t.Fatalf("round %d: %d racing Locks succeeded, want 1", round, wins.Load())
				}
			}
		})
	}
}
