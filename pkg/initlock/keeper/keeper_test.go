package keeper_test

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	"github.com/initlock/initlock/pkg/initlock"
	"github.com/initlock/initlock/pkg/initlock/capi"
	"github.com/initlock/initlock/pkg/initlock/initlocktest"
	"github.com/initlock/initlock/pkg/initlock/keeper"
)

const ns = "default"

var key = types.NamespacedName{Namespace: ns, Name: "c1"}

func object(kind func(version string) *unstructured.Unstructured, name string) *unstructured.Unstructured {
	u := kind(capi.V1Beta2)
	u.SetNamespace(ns)
	u.SetName(name)
	return u
}

func cluster(v string) *unstructured.Unstructured {
	u := &unstructured.Unstructured{Object: map[string]any{"spec": map[string]any{"paused": false}}}
	u.SetGroupVersionKind(capi.ClusterGVK(v))
	return u
}

func machine(v string) *unstructured.Unstructured {
	u := &unstructured.Unstructured{Object: map[string]any{}}
	u.SetGroupVersionKind(capi.MachineGVK(v))
	return u
}

// restored sets up what a restore leaves: Cluster c1 and its Machine m1
// with new UIDs, and m1's lock owned by the Cluster's old UID. It returns
// the client and a count of its writes.
func restored(t *testing.T) (client.Client, *atomic.Int32) {
	t.Helper()
	cl, m1 := object(cluster, "c1"), object(machine, "m1")
	var writes atomic.Int32
	count := func(ctx context.Context, c client.WithWatch, obj client.Object, patch client.Patch, opts ...client.PatchOption) error {
		writes.Add(1)
		return c.Patch(ctx, obj, patch, opts...)
	}
	c := initlocktest.NewClientBuilder(cl, m1).WithInterceptorFuncs(initlocktest.Funcs(interceptor.Funcs{Patch: count})).Build()
	res, err := initlock.New(c).Lock(t.Context(), cl, m1)
	if err != nil || !res.Acquired {
		t.Fatalf("Lock(m1) = %+v, %v", res, err)
	}
	cm := getLock(t, c)
	cm.OwnerReferences[0].UID = "uid-before-the-restore"
	if err := c.Update(t.Context(), cm); err != nil {
		t.Fatal(err)
	}
	writes.Store(0)
	return c, &writes
}

// getLock reads the lock of Cluster c1 from c.
func getLock(t *testing.T, c client.Client) *corev1.ConfigMap {
	t.Helper()
	cm := &corev1.ConfigMap{}
	if err := c.Get(t.Context(), types.NamespacedName{Namespace: ns, Name: "c1-lock"}, cm); err != nil {
		t.Fatal(err)
	}
	return cm
}

func query() keeper.Query {
	return keeper.Query{Namespace: ns, Cluster: "c1", CAPIVersion: capi.V1Beta2, Policy: keeper.DefaultPolicy(), Now: time.Now()}
}

// Inspect tells what a keeper would do and why; Apply does it, once.
func TestInspectApply(t *testing.T) {
	c, writes := restored(t)
	s, err := keeper.Inspect(t.Context(), c, query())
	if err != nil {
		t.Fatal(err)
	}
	if s.Verdict != "unowned" || s.Action != "adopt" || !s.Writes || s.Owner != "stale-uid" ||
		s.RecordHolder != "m1" || !s.HolderExists || s.Why == "" || s.Protection != "guarded" {
		t.Fatalf("Inspect = %+v; want an unowned lock of m1 to adopt, guarded", s)
	}
	if writes.Load() != 0 {
		t.Fatalf("Inspect wrote %d times", writes.Load())
	}
	done, err := keeper.Apply(t.Context(), c, s, time.Now())
	if err != nil || done.Action != "adopt" {
		t.Fatalf("Apply = %+v, %v; want adopt", done, err)
	}
	if got, want := getLock(t, c).OwnerReferences[0].UID, s.ClusterUID; got != want {
		t.Errorf("owner UID after Apply = %s, want the Cluster's %s", got, want)
	}
	if writes.Load() != 1 {
		t.Errorf("Apply wrote %d times, want one patch", writes.Load())
	}
	// The Status applied is stale now: its resourceVersion no longer holds.
	if _, err := keeper.Apply(t.Context(), c, s, time.Now()); !apierrors.IsConflict(err) {
		t.Errorf("Apply of the same Status again: %v, want a conflict", err)
	}
}

// Keep adopts the lock, emits its event, and writes nothing once it is
// healthy.
func TestKeep(t *testing.T) {
	c, writes := restored(t)
	rec := &recorder{}
	k := &keeper.Keeper{Client: c, APIReader: c, Recorder: rec, CAPIVersion: capi.V1Beta2, Policy: keeper.DefaultPolicy()}
	s, err := k.Keep(t.Context(), key)
	if err != nil || !s.Written || s.Action != "adopt" || s.Verdict != "unowned" {
		t.Fatalf("Keep = %+v, %v; want the lock adopted", s, err)
	}
	if len(rec.reasons) != 1 || rec.reasons[0] != "LockAdopted" {
		t.Errorf("events %v, want [LockAdopted]", rec.reasons)
	}
	s, err = k.Keep(t.Context(), key)
	if err != nil || s.Written || s.Verdict != "healthy" || s.Action != "none" {
		t.Fatalf("second Keep = %+v, %v; want a healthy lock left alone", s, err)
	}
	if writes.Load() != 1 {
		t.Errorf("two Keeps wrote %d times, want one", writes.Load())
	}
}

// An operator's release of a lock whose holder exists needs Force; given
// it, Release empties the grant and deletes the lock it inspected.
func TestRelease(t *testing.T) {
	c, _ := restored(t)
	q := query()
	q.Release = true
	s, err := keeper.Inspect(t.Context(), c, q)
	if err != nil {
		t.Fatal(err)
	}
	if !s.NeedsForce || s.ForceReason != "m1" || s.Err == nil || s.Writes {
		t.Fatalf("Inspect of a release without Force = %+v; want it refused, needing --force for m1", s)
	}
	if err := keeper.Release(t.Context(), c, s); err == nil {
		t.Fatal("Release of a refused Status succeeded")
	}
	q.Force = true
	if s, err = keeper.Inspect(t.Context(), c, q); err != nil || !s.Writes {
		t.Fatalf("Inspect with Force = %+v, %v", s, err)
	}
	if err := keeper.Release(t.Context(), c, s); err != nil {
		t.Fatal(err)
	}
	if err := c.Get(t.Context(), types.NamespacedName{Namespace: ns, Name: "c1-lock"}, &corev1.ConfigMap{}); !apierrors.IsNotFound(err) {
		t.Errorf("the lock after Release: %v, want it gone", err)
	}
	keep, err := keeper.Inspect(t.Context(), c, query())
	if err != nil {
		t.Fatal(err)
	}
	if err := keeper.Release(t.Context(), c, keep); err == nil {
		t.Error("Release of a keeper's Status, not an operator's release, succeeded")
	}
}

type recorder struct{ reasons []string }

func (r *recorder) Eventf(_, _ runtime.Object, _, reason, _, _ string, _ ...any) {
	r.reasons = append(r.reasons, reason)
}

// Inspect's Protection is the weakest a lock's marks leave it: a move mark
// lets a delete without options through, a release mark (valid only with
// the lock's own UID) only a delete bound to its resourceVersion.
func TestInspectProtection(t *testing.T) {
	for _, tc := range []struct {
		name    string
		release string // the release mark's value: "uid" for the lock's own
		move    bool
		want    string
	}{
		{name: "no mark", want: "guarded"},
		{name: "a release mark", release: "uid", want: "releasable"},
		{name: "a copy's release mark", release: "the-copied-lock-uid", want: "guarded"},
		{name: "a move mark", move: true, want: "moving"},
		{name: "both marks", release: "uid", move: true, want: "moving"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cl, m1 := object(cluster, "c1"), object(machine, "m1")
			c := initlocktest.NewClientBuilder(cl, m1).Build()
			if res, err := initlock.New(c).Lock(t.Context(), cl, m1); err != nil || !res.Acquired {
				t.Fatalf("Lock(m1) = %+v, %v", res, err)
			}
			cm := getLock(t, c)
			marks := map[string]string{}
			if tc.release == "uid" {
				marks["initlock.dev/releasable"] = string(cm.UID)
			} else if tc.release != "" {
				marks["initlock.dev/releasable"] = tc.release
			}
			if tc.move {
				marks["clusterctl.cluster.x-k8s.io/delete-for-move"] = ""
			}
			cm.SetAnnotations(marks)
			if err := c.Update(t.Context(), cm); err != nil {
				t.Fatal(err)
			}
			s, err := keeper.Inspect(t.Context(), c, query())
			if err != nil {
				t.Fatal(err)
			}
			if s.Protection != tc.want {
				t.Errorf("Protection = %q, want %q", s.Protection, tc.want)
			}
		})
	}
}
