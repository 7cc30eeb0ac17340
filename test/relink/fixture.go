package relinksuite

import (
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	velerov1 "github.com/vmware-tanzu/velero/pkg/apis/velero/v1"
	veleroplugin "github.com/vmware-tanzu/velero/pkg/plugin/velero"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/initlock/initlock/internal/kubeenv"
	"github.com/initlock/initlock/internal/kubeenv/velerosim"
	"github.com/initlock/initlock/internal/relink"
	"github.com/initlock/initlock/internal/velero"
	"github.com/initlock/initlock/pkg/initlock/capi"
)

// Backend is an API server the cases run against.
type Backend struct {
	// New returns a client of a namespace of its own for t, the
	// namespace, and the counter of the client's requests.
	New func(t *testing.T) (c client.Client, ns string, counter *kubeenv.Counter)
	// Collects tells that the garbage collector runs: an object whose
	// owners are all gone is deleted.
	Collects bool
}

// restoreName is the restore the cases' restored objects come from.
const restoreName = "restore-1"

var (
	clusterGVK   = capi.ClusterGVK(capi.V1Beta2)
	machineGVK   = capi.MachineGVK(capi.V1Beta2)
	configMapGVK = schema.GroupVersionKind{Version: "v1", Kind: "ConfigMap"}
	configMapGK  = configMapGVK.GroupKind()
)

// emitted is an event wantEvents expects: its type, reason and note.
type emitted struct{ eventtype, reason, note string }

// fixture is one case's namespace and a relinker made with
// relink.NewForClient, reading and writing the backend directly, whose
// Reconcile the case calls; the counter counts its requests.
type fixture struct {
	t        *testing.T
	ns       string
	c        client.Client
	counter  *kubeenv.Counter
	clock    *caseClock
	events   *kubeenv.Recorder
	registry *prometheus.Registry
	r        *relink.Relinker
	restorer *velerosim.Restorer
}

func newFixture(t *testing.T, b Backend, opts relink.Options) *fixture {
	t.Helper()
	return newFixtureWith(t, b, opts, nil)
}

// newFixtureWith is newFixture with the relinker's client made by wrap
// from the backend's (interceptor.Funcs around it), when wrap is set, so
// that a case can act between the relinker's requests or slow them.
func newFixtureWith(t *testing.T, b Backend, opts relink.Options, wrap func(client.Client) client.Client) *fixture {
	t.Helper()
	c, ns, counter := b.New(t)
	f := &fixture{
		t: t, ns: ns, c: c, counter: counter,
		clock:    newCaseClock(),
		events:   &kubeenv.Recorder{},
		registry: prometheus.NewRegistry(),
		restorer: velerosim.NewForClient(c, velerosim.Options{RestoreName: restoreName}),
	}
	opts.Clock, opts.Registry = f.clock, f.registry
	rc := c
	if wrap != nil {
		rc = wrap(c)
	}
	r, err := relink.NewForClient(opts, rc, f.events)
	if err != nil {
		t.Fatal(err)
	}
	f.r = r
	return f
}

// backedUp returns u as a backup holds it: with a UID of the backed-up
// cluster's and owned by owners.
func backedUp(u *unstructured.Unstructured, owners ...metav1.OwnerReference) *unstructured.Unstructured {
	u.SetUID(oldUID(u.GetKind(), u.GetName()))
	u.SetOwnerReferences(owners)
	return u
}

// oldUID is the UID an object had in the backed-up cluster.
func oldUID(kind, name string) types.UID { return types.UID("backup-" + kind + "-" + name) }

// oldRef is a reference to an owner of the backed-up cluster, as a
// dependent's backed-up ownerReferences hold it.
func oldRef(gvk schema.GroupVersionKind, name string, controller bool) metav1.OwnerReference {
	r := metav1.OwnerReference{APIVersion: gvk.GroupVersion().String(), Kind: gvk.Kind, Name: name, UID: oldUID(gvk.Kind, name)}
	if controller {
		r.Controller, r.BlockOwnerDeletion = ptr.To(true), ptr.To(true)
	}
	return r
}

// refTo is the reference the relinker writes to owner: of its current UID,
// with the controller fields of the recorded reference.
func refTo(owner *unstructured.Unstructured, controller bool) metav1.OwnerReference {
	r := oldRef(owner.GroupVersionKind(), owner.GetName(), controller)
	r.UID = owner.GetUID()
	return r
}

// configMap returns a ConfigMap of cluster, not yet created.
func configMap(ns, name, cluster string) *unstructured.Unstructured {
	u := &unstructured.Unstructured{}
	u.SetGroupVersionKind(configMapGVK)
	u.SetNamespace(ns)
	u.SetName(name)
	u.SetLabels(map[string]string{capi.ClusterNameLabel: cluster})
	u.Object["data"] = map[string]any{"k": "v"}
	return u
}

func (f *fixture) create(u *unstructured.Unstructured) *unstructured.Unstructured {
	f.t.Helper()
	if err := f.c.Create(f.t.Context(), u); err != nil {
		f.t.Fatalf("creating %s %s: %v", u.GetKind(), u.GetName(), err)
	}
	return u
}

// restore creates what a Velero restore with initlock's plugin creates for
// backed (restoredItem).
func (f *fixture) restore(backed *unstructured.Unstructured) *unstructured.Unstructured {
	f.t.Helper()
	return f.create(f.restoredItem(backed))
}

// restoredItem is what a Velero restore with initlock's plugin creates for
// backed, not yet created: the simulator resets it and labels it with the
// restore, and the plugin's action records its ownerReferences in
// relink.Annotation.
func (f *fixture) restoredItem(backed *unstructured.Unstructured) *unstructured.Unstructured {
	f.t.Helper()
	item, err := f.restorer.Item(backed)
	if err != nil {
		f.t.Fatal(err)
	}
	out, err := velero.NewAction(velero.DefaultConfig(), false, nil).Execute(&veleroplugin.RestoreItemActionExecuteInput{
		Item: item, ItemFromBackup: backed,
		Restore: &velerov1.Restore{ObjectMeta: metav1.ObjectMeta{Namespace: "velero", Name: restoreName}},
	})
	if err != nil {
		f.t.Fatal(err)
	}
	return out.UpdatedItem.(*unstructured.Unstructured)
}

func (f *fixture) get(gvk schema.GroupVersionKind, name string) *unstructured.Unstructured {
	f.t.Helper()
	u := &unstructured.Unstructured{}
	u.SetGroupVersionKind(gvk)
	if err := f.c.Get(f.t.Context(), client.ObjectKey{Namespace: f.ns, Name: name}, u); err != nil {
		f.t.Fatalf("reading %s %s: %v", gvk.Kind, name, err)
	}
	return u
}

// reconcile runs one reconcile of the named object, its requests counted
// from zero.
func (f *fixture) reconcile(gvk schema.GroupVersionKind, name string) (ctrl.Result, error) {
	f.t.Helper()
	f.counter.Reset()
	return f.r.Reconcile(f.t.Context(), relink.Request{GVK: gvk, NamespacedName: types.NamespacedName{Namespace: f.ns, Name: name}})
}

// reconciled is reconcile, failing the case on an error.
func (f *fixture) reconciled(gvk schema.GroupVersionKind, name string) ctrl.Result {
	f.t.Helper()
	res, err := f.reconcile(gvk, name)
	if err != nil {
		f.t.Fatalf("Reconcile %s %s: %v", gvk.Kind, name, err)
	}
	return res
}

// wantRequests checks the requests of the last reconcile in the case's
// namespace, each written "verb resource/name status".
func (f *fixture) wantRequests(want map[string]int) {
	f.t.Helper()
	got := map[string]int{}
	for call, n := range f.counter.Calls() {
		if call.Namespace == f.ns && n > 0 {
			got[fmt.Sprintf("%s %s/%s %d", call.Verb, call.Resource, call.Name, call.Status)] += n
		}
	}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		f.t.Errorf("requests = %v\nwant       %v", got, want)
	}
}

// wantLinked checks that the object holds exactly refs, in order, and no
// longer the annotation.
func (f *fixture) wantLinked(gvk schema.GroupVersionKind, name string, refs ...metav1.OwnerReference) {
	f.t.Helper()
	u := f.get(gvk, name)
	if v, ok := u.GetAnnotations()[relink.Annotation]; ok {
		f.t.Errorf("%s %s still has the annotation %s", gvk.Kind, name, v)
	}
	if got, want := refStrings(u.GetOwnerReferences()), refStrings(refs); !slices.Equal(got, want) {
		f.t.Errorf("%s %s ownerReferences = %v\nwant %v", gvk.Kind, name, got, want)
	}
}

// refStrings writes references with their flags: "apiVersion Kind name
// uid controller=… blockOwnerDeletion=…", nil flags as -.
func refStrings(refs []metav1.OwnerReference) []string {
	flag := func(b *bool) string {
		if b == nil {
			return "-"
		}
		return fmt.Sprint(*b)
	}
	out := make([]string, len(refs))
	for i, r := range refs {
		out[i] = fmt.Sprintf("%s %s %s %s controller=%s blockOwnerDeletion=%s", r.APIVersion, r.Kind, r.Name, r.UID, flag(r.Controller), flag(r.BlockOwnerDeletion))
	}
	return out
}

// wantUnlinked checks that the object holds no ownerReference and still
// the annotation.
func (f *fixture) wantUnlinked(gvk schema.GroupVersionKind, name string) {
	f.t.Helper()
	u := f.get(gvk, name)
	if _, ok := u.GetAnnotations()[relink.Annotation]; !ok || len(u.GetOwnerReferences()) > 0 {
		f.t.Errorf("%s %s changed: ownerReferences %v, annotations %v", gvk.Kind, name, u.GetOwnerReferences(), u.GetAnnotations())
	}
}

func (f *fixture) wantEvents(want ...emitted) {
	f.t.Helper()
	var got []emitted
	for _, e := range f.events.Events() {
		got = append(got, emitted{e.Type, e.Reason, e.Note})
	}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		f.t.Errorf("events = %v\nwant     %v", got, want)
	}
}

// wantWaiting checks the objects waiting for an owner, and the gauge that
// counts those of kind gk.
func (f *fixture) wantWaiting(gk schema.GroupKind, names ...string) {
	f.t.Helper()
	var got []string
	for _, req := range f.r.Waiting() {
		got = append(got, req.Name)
	}
	if !slices.Equal(got, names) {
		f.t.Errorf("waiting = %v, want %v", got, names)
	}
	if n, err := f.metric(relink.WaitingMetric, gk); err != nil || n != float64(len(names)) {
		f.t.Errorf("%s{%s} = %v (%v), want %d", relink.WaitingMetric, gk, n, err, len(names))
	}
}

// metric returns the value of a gauge or counter of the relinker for gk.
func (f *fixture) metric(name string, gk schema.GroupKind) (float64, error) {
	v, ok, err := gathered(f.registry, name, map[string]string{"group": gk.Group, "kind": gk.Kind})
	if err == nil && !ok {
		err = errors.New("no such metric")
	}
	return v, err
}

// gathered sums the samples of the counter or gauge name of g whose labels
// include labels; ok tells whether there was one.
func gathered(g prometheus.Gatherer, name string, labels map[string]string) (sum float64, ok bool, err error) {
	families, err := g.Gather()
	if err != nil {
		return 0, false, err
	}
	for _, fam := range families {
		if fam.GetName() != name {
			continue
		}
	next:
		for _, m := range fam.GetMetric() {
			have := map[string]string{}
			for _, l := range m.GetLabel() {
				have[l.GetName()] = l.GetValue()
			}
			for k, v := range labels {
				if have[k] != v {
					continue next
				}
			}
			ok = true
			sum += m.GetGauge().GetValue() + m.GetCounter().GetValue()
		}
	}
	return sum, ok, nil
}

// at sets the relinker's clock to d after obj's creation.
func (f *fixture) at(obj *unstructured.Unstructured, d time.Duration) {
	f.clock.SetTime(obj.GetCreationTimestamp().Add(d))
}
