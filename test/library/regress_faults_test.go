package library_test

import (
	"context"
	"encoding/json"
	"strings"
	"sync"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	"github.com/initlock/initlock/internal/kubeenv"
	"github.com/initlock/initlock/internal/kubeenv/wire"
	"github.com/initlock/initlock/pkg/initlock"
)

// The regression tests inject, with interceptor.Funcs around a client of
// the real API server, the failures that server does not produce on
// demand: an answer lost after the write was applied, and a write the
// server applies after its client gave up. Everything else, and every
// precondition, is the real API server's.

// outcome is what the fault layer does with one write.
type outcome int

const (
	// pass sends the write and returns the server's answer.
	pass outcome = iota
	// appliedThenFail sends the write and returns an error in place of the
	// answer: the write is applied, the caller cannot know it.
	appliedThenFail
	// refuse returns an error without sending the write.
	refuse
	// hold returns an error without sending the write now; late sends it.
	hold
)

// write is one write request as the fault layer sees it.
type write struct {
	verb      string // create, patch or delete
	obj       client.Object
	patchType types.PatchType
	patch     []byte
	delOpts   []client.DeleteOption
	// answer is the object the server's answer is decoded into.
	answer client.Object
}

// grant returns the value a patch writes into a Cluster's grant register,
// or nil when it writes none.
func (w write) grant() *wire.Grant {
	if w.verb != "patch" || w.patchType != types.JSONPatchType || w.obj.GetObjectKind().GroupVersionKind().Kind != "Cluster" {
		return nil
	}
	var ops []struct {
		Op    string          `json:"op"`
		Path  string          `json:"path"`
		Value json.RawMessage `json:"value"`
	}
	if json.Unmarshal(w.patch, &ops) != nil {
		return nil
	}
	for _, op := range ops {
		if op.Op != "add" && op.Op != "replace" {
			continue
		}
		var v string
		switch op.Path {
		case "/metadata/annotations/initlock.dev~1init-lock-grant":
			if json.Unmarshal(op.Value, &v) != nil {
				return nil
			}
		case "/metadata/annotations":
			var m map[string]string
			if json.Unmarshal(op.Value, &m) != nil {
				return nil
			}
			v = m[wire.GrantAnnotation]
		default:
			continue
		}
		return wire.GrantFrom(map[string]string{wire.GrantAnnotation: v})
	}
	return nil
}

// claimBy tells whether w claims the register for machine; withdrawal
// whether it records a release.
func (w write) claimBy(machine string) bool {
	g := w.grant()
	return g.Held() && g.MachineName == machine
}
func (w write) withdrawal() bool { return w.grant().Released() }

// failWhen makes f's client and Locker answer err, with outcome o, to every
// write that match picks, and pass the others.
func (f *fixture) failWhen(t *testing.T, match func(write) bool, o outcome, err error) *faults {
	t.Helper()
	return f.withFaults(t, func(w write) (outcome, error) {
		if match(w) {
			return o, err
		}
		return pass, nil
	})
}

// verb picks the writes of verb; claimBy the claims of the register for
// machine.
func verb(v string) func(write) bool { return func(w write) bool { return w.verb == v } }
func claimBy(machine string) func(write) bool {
	return func(w write) bool { return w.claimBy(machine) }
}

// faults is the fault layer: rule decides the outcome of each write, and
// the error returned instead of the server's answer.
type faults struct {
	mu   sync.Mutex
	rule func(w write) (outcome, error)
	// held are the writes to send late; injected counts the writes whose
	// answer the layer replaced.
	held     []write
	injected int
	// applied receives, for appliedThenFail, the object as the server
	// returned it.
	applied []client.Object
}

// withFaults makes f's client and Locker go through a fault layer with
// rule. Requests that reach the server are still counted in f.counter.
func (f *fixture) withFaults(t *testing.T, rule func(w write) (outcome, error)) *faults {
	t.Helper()
	base, err := client.NewWithWatch(f.counter.CountingConfig(env.Config), client.Options{Scheme: kubeenv.Scheme()})
	if err != nil {
		t.Fatal(err)
	}
	fl := &faults{rule: rule}
	f.client = interceptor.NewClient(base, interceptor.Funcs{
		Create: func(ctx context.Context, c client.WithWatch, obj client.Object, opts ...client.CreateOption) error {
			return fl.do(write{verb: "create", obj: obj, answer: obj}, func() error { return c.Create(ctx, obj, opts...) })
		},
		Patch: func(ctx context.Context, c client.WithWatch, obj client.Object, p client.Patch, opts ...client.PatchOption) error {
			data, err := p.Data(obj)
			if err != nil {
				return err
			}
			w := write{verb: "patch", obj: obj.DeepCopyObject().(client.Object), patchType: p.Type(), patch: data, answer: obj}
			return fl.do(w, func() error { return c.Patch(ctx, obj, p, opts...) })
		},
		Delete: func(ctx context.Context, c client.WithWatch, obj client.Object, opts ...client.DeleteOption) error {
			w := write{verb: "delete", obj: obj.DeepCopyObject().(client.Object), delOpts: opts, answer: obj}
			return fl.do(w, func() error { return c.Delete(ctx, obj, opts...) })
		},
	})
	f.locker = initlock.New(f.client)
	return fl
}

func (fl *faults) do(w write, send func() error) error {
	fl.mu.Lock()
	o, injected := fl.rule(w)
	if o != pass {
		fl.injected++
	}
	if o == hold {
		fl.held = append(fl.held, w)
	}
	fl.mu.Unlock()
	switch o {
	case appliedThenFail:
		if err := send(); err != nil {
			return err
		}
		fl.mu.Lock()
		fl.applied = append(fl.applied, w.answer.DeepCopyObject().(client.Object))
		fl.mu.Unlock()
		return injected
	case refuse, hold:
		return injected
	}
	return send()
}

// late sends the held writes, in the order they were held, with the admin
// client, and returns the server's answer to each.
func (fl *faults) late(ctx context.Context) []error {
	fl.mu.Lock()
	held := fl.held
	fl.held = nil
	fl.mu.Unlock()
	errs := make([]error, len(held))
	for i, w := range held {
		switch w.verb {
		case "patch":
			errs[i] = env.Client.Patch(ctx, w.obj, client.RawPatch(w.patchType, w.patch))
		case "delete":
			errs[i] = env.Client.Delete(ctx, w.obj, w.delOpts...)
		case "create":
			errs[i] = env.Client.Create(ctx, w.obj)
		}
	}
	return errs
}

// Errors the fault layer answers with.
var (
	unavailable = apierrors.NewServiceUnavailable("etcd leader changed")
	timedOut    = context.DeadlineExceeded
)

// snapshot is the Cluster as a lagging informer cache would hand it to
// the caller: a copy of obj.
func snapshot(obj client.Object) *unstructured.Unstructured {
	u, ok := obj.(*unstructured.Unstructured)
	if !ok {
		panic("not unstructured")
	}
	return u.DeepCopy()
}

// lockRecord decodes the live lock's record; ok is false when there is no
// lock.
func (f *fixture) lockRecord(t *testing.T) (wire.Record, string, bool) {
	t.Helper()
	cm := kubeenv.MustGetLock(f.t, env.Client, f.ns, "c1")
	if cm == nil {
		return wire.Record{}, "", false
	}
	r, err := wire.DecodeRecord(cm.Data[wire.DataKey])
	if err != nil {
		t.Fatal(err)
	}
	return r, cm.ResourceVersion, true
}

// expectRefused checks that Lock refused the caller without an error and
// named holder.
func expectRefused(t *testing.T, who string, res initlock.Result, err error, holder string) {
	t.Helper()
	if err != nil || res.Acquired || res.Holder != holder {
		t.Fatalf("Lock(%s) = %+v, %v; want refused without an error, held by %s", who, res, err, holder)
	}
}

// expectAcquired checks that Lock told the caller it holds the lock.
func expectAcquired(t *testing.T, who string, res initlock.Result, err error) {
	t.Helper()
	if err != nil || !res.Acquired || res.Holder != who {
		t.Fatalf("Lock(%s) = %+v, %v; want acquired", who, res, err)
	}
}

// lockLive makes m's Lock with the Cluster read live, and checks that it
// is refused without an error, the lock held by holder; or, when holder is
// m's name, that m acquires.
func (f *fixture) lockLive(t *testing.T, m *unstructured.Unstructured, holder string) initlock.Result {
	t.Helper()
	res, err := f.locker.Lock(t.Context(), f.get(f.cluster), m)
	if holder == m.GetName() {
		expectAcquired(t, holder, res, err)
	} else {
		expectRefused(t, m.GetName(), res, err, holder)
	}
	return res
}

// expectNames checks that err's message names each of parts: the UIDs
// it turns on, the way out.
func expectNames(t *testing.T, err error, parts ...string) {
	t.Helper()
	for _, p := range parts {
		if !strings.Contains(err.Error(), p) {
			t.Errorf("error %q does not name %s", err, p)
		}
	}
}

// counts checks the requests that reached the API server since the last
// Reset.
func (f *fixture) counts(t *testing.T, what string, reads, writes int) {
	t.Helper()
	if r, w := f.counter.Reads(), f.counter.Writes(); r != reads || w != writes {
		t.Errorf("%s made %d reads and %d writes, want %d and %d", what, r, w, reads, writes)
	}
	f.counter.Reset()
}
