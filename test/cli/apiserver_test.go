package clisuite

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/initlock/initlock/internal/cli"
	"github.com/initlock/initlock/internal/kubeenv"
	"github.com/initlock/initlock/internal/kubeenv/velerosim"
	"github.com/initlock/initlock/internal/kubeenv/wire"
	"github.com/initlock/initlock/pkg/initlock/capi"
)

func (b *Backend) backup(t *testing.T, obj client.Object, gvkObj *unstructured.Unstructured) *unstructured.Unstructured {
	t.Helper()
	u := gvkObj.DeepCopy()
	if err := b.Client.Get(t.Context(), client.ObjectKeyFromObject(obj), u); err != nil {
		t.Fatalf("backing up %s: %v", obj.GetName(), err)
	}
	return u
}

// After a Velero-style restore the lock has lost its ownerReference and
// the Cluster has a new UID; repair re-adopts the lock and list shows
// everything healthy.
func TestRepairAfterVeleroRestore(t *testing.T) {
	b := apiServer()
	ns, cluster := b.lockedCluster(t)
	machine := kubeenv.NewMachine(b.CAPIVersion, ns, "c1", "m1")
	if got := byCluster(b.listJSON(t, ns))["c1"]; got.Verdict != "healthy" {
		t.Fatalf("before backup: %+v", got)
	}

	cmKind := &unstructured.Unstructured{}
	cmKind.SetGroupVersionKind(corev1.SchemeGroupVersion.WithKind("ConfigMap"))
	lockObj := &corev1.ConfigMap{}
	lockObj.Namespace, lockObj.Name = ns, "c1-lock"
	savedLock := b.backup(t, lockObj, cmKind)
	savedMachine := b.backup(t, machine, machine)
	savedCluster := b.backup(t, cluster, cluster)
	oldUID := cluster.GetUID()

	// Disaster: the cluster goes, with its lock (past the lock guard), so
	// do the machines.
	if err := kubeenv.ReleaseLock(t.Context(), b.Client, lockObj); err != nil {
		t.Fatal(err)
	}
	kubeenv.DeleteAndWait(t, b.Client, cluster, machine)
	kubeenv.WaitGone(t, b.Client, lockObj)

	// Restore in Velero's order: ConfigMaps, then Machines, then Clusters.
	out := velerosim.Restore(t, env.Config, velerosim.Options{}, savedCluster, savedMachine, savedLock)
	restored := out[len(out)-1]
	if restored.GetKind() != "Cluster" {
		t.Fatalf("restored %s last, want the Cluster", restored.GetKind())
	}
	if restored.GetUID() == oldUID {
		t.Fatal("restored cluster kept its UID")
	}

	got := byCluster(b.listJSON(t, ns))["c1"]
	if got.Verdict != "unowned" || got.Owner != "missing" || !got.HolderExists || got.Holder != "m1" || got.Action != "adopt" {
		t.Fatalf("after restore: %+v", got)
	}

	var c kubeenv.Counter
	b.run(t, invocation{counter: &c}, "repair", "-n", ns, "--yes").ExpectCode(t, cli.ExitOK).OutHas(t, "adopted", "no ownerReference to its Cluster")
	expectN(t, "writes (one patch of the lock)", c.Writes(), 1)

	for _, s := range b.listJSON(t, ns, "--show-free").Items {
		if s.Verdict != "healthy" || s.Owner != "ok" {
			t.Errorf("after repair: %+v", s)
		}
	}
	cm := kubeenv.MustGetLock(t, b.Client, ns, "c1")
	if len(cm.OwnerReferences) != 1 || cm.OwnerReferences[0].UID != restored.GetUID() {
		t.Fatalf("lock owner references after repair: %+v", cm.OwnerReferences)
	}
	// A second repair has nothing to do.
	c.Reset()
	b.run(t, invocation{counter: &c}, "repair", "-n", ns, "--yes").ExpectCode(t, cli.ExitOK).OutHas(t, "Nothing to change.")
	expectN(t, "writes of the second repair", c.Writes(), 0)
}

// The v1beta2 Clusters of this control plane are read in the version
// discovery prefers.
func TestDiscoveredVersion(t *testing.T) {
	v, err := capi.Discover(env.Discovery(t))
	if err != nil || v != capi.V1Beta2 {
		t.Fatalf("Discover = %q, %v", v, err)
	}
}

// TestReleaseGuardedLockWithoutTheManager: with initlock-manager down, the
// lock of a deleted Cluster stays while its holder exists (the lock guard
// refuses the garbage collector's delete); the namespace is not held up by
// it. release refuses without --force, since the holder exists; with it,
// it marks the lock for release and deletes it.
func TestReleaseGuardedLockWithoutTheManager(t *testing.T) {
	b := apiServer()
	ns, cluster := b.lockedCluster(t)
	if err := b.Client.Delete(t.Context(), cluster); err != nil {
		t.Fatal(err)
	}
	kubeenv.Consistently(t, 3*time.Second, func() error {
		switch got := kubeenv.MustGetLock(t, b.Client, ns, "c1"); {
		case got == nil:
			return fmt.Errorf("the held lock went while its holder exists")
		case got.DeletionTimestamp != nil:
			return fmt.Errorf("the held lock is being deleted")
		}
		return nil
	})

	b.run(t, invocation{}, "list", "-n", ns).ExpectCode(t, cli.ExitOK).OutHas(t, "guarded")
	b.run(t, invocation{}, "release", "c1", "-n", ns, "--yes").ExpectCode(t, cli.ExitError)
	var c kubeenv.Counter
	b.expectLock(t, ns, false, b.run(t, invocation{counter: &c}, "release", "c1", "-n", ns, "--force", "--yes").ExpectCode(t, cli.ExitOK))
	// The Cluster is gone, so the register is not read or written: one
	// patch marks the lock for release, one delete removes it.
	expectN(t, "patches of release --force (the release mark)", c.Count("patch"), 1)
	expectN(t, "deletes of release --force", c.Count("delete"), 1)
}

// TestReleaseTakesItsMarkOff: a release without --force of a gone holder's
// lock, whose holder Machine is created again around its release mark,
// refuses and takes the mark it wrote off, whatever fails on the way: the
// lock guard holds the lock again.
func TestReleaseTakesItsMarkOff(t *testing.T) {
	unavailable := func(req *http.Request) *http.Response {
		return &http.Response{StatusCode: http.StatusServiceUnavailable, Request: req,
			Header: http.Header{"Content-Type": []string{"application/json"}},
			Body:   io.NopCloser(strings.NewReader(`{"kind":"Status","apiVersion":"v1","status":"Failure","reason":"ServiceUnavailable","code":503}`))}
	}
	for _, tc := range []struct {
		name string
		// patch answers the n-th patch of the lock (from 1); holderBack
		// creates m1 again.
		patch func(n int32, req *http.Request, send func() (*http.Response, error), holderBack func()) (*http.Response, error)
		// wantPatches is the fewest patches of the lock the case makes.
		wantPatches int32
	}{
		{
			name: "the mark applied, its answer lost",
			patch: func(n int32, req *http.Request, send func() (*http.Response, error), holderBack func()) (*http.Response, error) {
				resp, err := send()
				if n != 1 || err != nil || resp.StatusCode >= 300 {
					return resp, err
				}
				_ = resp.Body.Close()
				holderBack()
				return nil, errors.New("connection reset by peer")
			},
			wantPatches: 2,
		},
		{
			name: "the first try at taking the mark off failing, not applied",
			patch: func(n int32, req *http.Request, send func() (*http.Response, error), holderBack func()) (*http.Response, error) {
				switch n {
				case 1:
					resp, err := send()
					holderBack()
					return resp, err
				case 2:
					return unavailable(req), nil
				}
				return send()
			},
			wantPatches: 3,
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b := apiServer()
			ns := b.Namespace(t)
			cl := b.newCluster(t, ns, "c1", false)
			b.newLock(t, ns, "c1", "m1", cl) // m1 is gone: no --force needed
			var patches atomic.Int32
			through := func(req *http.Request, send func() (*http.Response, error)) (*http.Response, error) {
				if r := kubeenv.Classify(req); r.Verb != "patch" || r.Resource != "configmaps" {
					return send()
				}
				holderBack := func() {
					if err := b.Client.Create(context.WithoutCancel(req.Context()), kubeenv.NewMachine(b.CAPIVersion, ns, "c1", "m1")); err != nil {
						t.Errorf("creating m1: %v", err)
					}
				}
				return tc.patch(patches.Add(1), req, send, holderBack)
			}
			r := b.runThrough(t, through, "release", "c1", "-n", ns, "--yes").ExpectCode(t, cli.ExitError)
			if n := patches.Load(); n < tc.wantPatches {
				t.Fatalf("%d patches of the lock, want %d at least (the mark, and its unmark)", n, tc.wantPatches)
			}
			cm := kubeenv.MustGetLock(t, b.Client, ns, "c1")
			if cm == nil {
				t.Fatalf("the lock of m1 was released\nstderr:\n%s", r.Err)
			}
			if _, marked := cm.Annotations[wire.ReleaseAnnotation]; marked {
				t.Errorf("the release mark was left on the held lock: %v\nstderr:\n%s", cm.Annotations, r.Err)
			}
			if err := b.Client.Delete(t.Context(), cm); err == nil {
				t.Errorf("the lock guard let a plain delete of the held lock through")
			}
		})
	}
}
