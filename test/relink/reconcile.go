package relinksuite

import (
	"errors"
	"strings"
	"testing"
	"time"

	velerov1 "github.com/vmware-tanzu/velero/pkg/apis/velero/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/initlock/initlock/internal/kubeenv"
	"github.com/initlock/initlock/internal/relink"
	"github.com/initlock/initlock/pkg/initlock/capi"
)

// Reconcile runs the cases of one reconcile at a time: which references
// are written, which objects are left alone, the requests each reconcile
// makes, its requeue, events and gauges.
func Reconcile(t *testing.T, b Backend) {
	t.Run("links to the owners the same restore brought back", func(t *testing.T) { sameRestore(t, b) })
	t.Run("waits for a missing owner, warns once and links when it comes", func(t *testing.T) { missingOwner(t, b) })
	t.Run("leaves an owner nothing proves until a restore labels it", func(t *testing.T) { unprovenOwner(t, b) })
	t.Run("links to the backed-up owner itself", func(t *testing.T) { originalOwner(t, b) })
	t.Run("keeps what it did not record, corrects a stale reference and yields the controller", func(t *testing.T) { keepsOtherReferences(t, b) })
	t.Run("leaves a paused Cluster's objects until it is unpaused", func(t *testing.T) { pausedCluster(t, b) })
	t.Run("reports an annotation it cannot read and leaves the object", func(t *testing.T) { invalidAnnotation(t, b) })
	t.Run("names an owner of a kind not served", func(t *testing.T) { kindNotServed(t, b) })
	t.Run("does nothing for objects gone or of kinds not relinked", func(t *testing.T) { nothingToDo(t, b) })
	t.Run("refuses configured kinds that are not served", func(t *testing.T) { configuredKindNotServed(t, b) })
	t.Run("never writes an owner deleted after its read while another owner's read is slow", func(t *testing.T) { deletedWhileAnotherIsRead(t, b) })
	t.Run("confirms many owners of a kind not watched batch by batch, each right before its patch", func(t *testing.T) { manyOwnersNotWatched(t, b) })
	t.Run("gives up on an owner whose reads all come back ConfirmFor old, patching nothing", func(t *testing.T) { notConfirmed(t, b) })
}

func wantResult(t *testing.T, got, want ctrl.Result) {
	t.Helper()
	if got != want {
		t.Errorf("result = %+v, want %+v", got, want)
	}
}

func sameRestore(t *testing.T, b Backend) {
	f := newFixture(t, b, relink.Options{})
	cluster := f.restore(backedUp(kubeenv.NewCluster(capi.V1Beta2, f.ns, "c1")))
	machine := f.restore(backedUp(kubeenv.NewMachine(capi.V1Beta2, f.ns, "c1", "m-0"), oldRef(clusterGVK, "c1", false)))
	f.restore(backedUp(configMap(f.ns, "m-0-bootstrap", "c1"), oldRef(machineGVK, "m-0", true)))
	f.restore(backedUp(configMap(f.ns, "plain", "c1")))

	// The Machine is read from the objects, proven by the restore label,
	// then read live; the ConfigMap's Cluster is read for its pause.
	wantResult(t, f.reconciled(configMapGVK, "m-0-bootstrap"), ctrl.Result{})
	f.wantRequests(map[string]int{
		"get configmaps/m-0-bootstrap 200": 1, "get clusters/c1 200": 1, "get machines/m-0 200": 2, "patch configmaps/m-0-bootstrap 200": 1,
	})
	f.wantLinked(configMapGVK, "m-0-bootstrap", refTo(machine, true))

	wantResult(t, f.reconciled(machineGVK, "m-0"), ctrl.Result{})
	f.wantRequests(map[string]int{"get machines/m-0 200": 1, "get clusters/c1 200": 3, "patch machines/m-0 200": 1})
	f.wantLinked(machineGVK, "m-0", refTo(cluster, false))

	// Linked, or restored without owners: one read, no write.
	for _, name := range []string{"m-0-bootstrap", "plain"} {
		wantResult(t, f.reconciled(configMapGVK, name), ctrl.Result{})
		f.wantRequests(map[string]int{"get configmaps/" + name + " 200": 1})
	}
	if refs := f.get(configMapGVK, "plain").GetOwnerReferences(); len(refs) > 0 {
		t.Errorf("plain got ownerReferences %v", refs)
	}
	for _, gk := range []schema.GroupKind{configMapGK, machineGVK.GroupKind()} {
		if n, err := f.metric(relink.LinkedMetric, gk); err != nil || n != 1 {
			t.Errorf("%s{%s} = %v (%v), want 1", relink.LinkedMetric, gk, n, err)
		}
	}
	f.wantEvents()
	f.wantWaiting(configMapGK)
}

func missingOwner(t *testing.T, b Backend) {
	f := newFixture(t, b, relink.Options{})
	cm := f.restore(backedUp(configMap(f.ns, "c1-kubeconfig", "c1"), oldRef(clusterGVK, "c1", false)))
	f.at(cm, 0)

	// Not in the objects: waited for without a live read, backing off.
	for _, backoff := range []time.Duration{time.Second, 2 * time.Second} {
		wantResult(t, f.reconciled(configMapGVK, "c1-kubeconfig"), ctrl.Result{RequeueAfter: backoff})
		f.wantRequests(map[string]int{"get configmaps/c1-kubeconfig 200": 1, "get clusters/c1 404": 2})
	}
	f.wantUnlinked(configMapGVK, "c1-kubeconfig")
	f.wantWaiting(configMapGK, "c1-kubeconfig")
	f.wantEvents()

	// After WarnAfter (5 minutes), one warning, not repeated.
	f.at(cm, 5*time.Minute)
	wantResult(t, f.reconciled(configMapGVK, "c1-kubeconfig"), ctrl.Result{RequeueAfter: 4 * time.Second})
	wantResult(t, f.reconciled(configMapGVK, "c1-kubeconfig"), ctrl.Result{RequeueAfter: 8 * time.Second})
	f.wantEvents(emitted{"Warning", relink.ReasonOwnerNotFound, "Owner Cluster cluster.x-k8s.io/v1beta2 c1 not found 5m0s after restore; " +
		"the object stays unlinked and nothing is deleted until it is restored"})

	cluster := f.restore(backedUp(kubeenv.NewCluster(capi.V1Beta2, f.ns, "c1")))
	wantResult(t, f.reconciled(configMapGVK, "c1-kubeconfig"), ctrl.Result{})
	f.wantRequests(map[string]int{"get configmaps/c1-kubeconfig 200": 1, "get clusters/c1 200": 3, "patch configmaps/c1-kubeconfig 200": 1})
	f.wantLinked(configMapGVK, "c1-kubeconfig", refTo(cluster, false))
	f.wantWaiting(configMapGK)
}

func unprovenOwner(t *testing.T, b Backend) {
	f := newFixture(t, b, relink.Options{})
	unrelated := f.create(kubeenv.NewCluster(capi.V1Beta2, f.ns, "c1"))
	cm := f.restore(backedUp(configMap(f.ns, "c1-addons", "c1"), oldRef(clusterGVK, "c1", false)))
	f.at(cm, 5*time.Minute)

	// Neither its UID nor a restore label proves the Cluster: no live read.
	wantResult(t, f.reconciled(configMapGVK, "c1-addons"), ctrl.Result{RequeueAfter: time.Second})
	f.wantRequests(map[string]int{"get configmaps/c1-addons 200": 1, "get clusters/c1 200": 2})
	f.wantUnlinked(configMapGVK, "c1-addons")
	f.wantEvents(emitted{"Warning", relink.ReasonOwnerNotProven, "Owner Cluster cluster.x-k8s.io/v1beta2 c1 exists with UID " +
		string(unrelated.GetUID()) + ", not the backed-up UID " + string(oldUID("Cluster", "c1")) + ", and was not restored by restore " + restoreName +
		"; the object stays unlinked and nothing is deleted: link it by hand if that object is its owner"})
	if n, err := f.metric(relink.UnprovenMetric, configMapGK); err != nil || n != 1 {
		t.Errorf("%s = %v (%v), want 1", relink.UnprovenMetric, n, err)
	}

	// --existing-resource-policy=update labels the existing Cluster with
	// the restore: that proves it.
	label := `{"metadata":{"labels":{"` + velerov1.RestoreNameLabel + `":"` + restoreName + `"}}}`
	if err := f.c.Patch(t.Context(), unrelated, client.RawPatch(types.MergePatchType, []byte(label))); err != nil {
		t.Fatal(err)
	}
	wantResult(t, f.reconciled(configMapGVK, "c1-addons"), ctrl.Result{})
	f.wantLinked(configMapGVK, "c1-addons", refTo(unrelated, false))
	if n, err := f.metric(relink.UnprovenMetric, configMapGK); err != nil || n != 0 {
		t.Errorf("%s = %v (%v), want 0", relink.UnprovenMetric, n, err)
	}
	f.wantWaiting(configMapGK)
}

func originalOwner(t *testing.T, b Backend) {
	f := newFixture(t, b, relink.Options{})
	// A partial restore of a lost dependent: its owner was never deleted.
	cluster := f.create(kubeenv.NewCluster(capi.V1Beta2, f.ns, "c1"))
	f.restore(backedUp(configMap(f.ns, "c1-addons", "c1"), refTo(cluster, false)))

	wantResult(t, f.reconciled(configMapGVK, "c1-addons"), ctrl.Result{})
	f.wantRequests(map[string]int{"get configmaps/c1-addons 200": 1, "get clusters/c1 200": 3, "patch configmaps/c1-addons 200": 1})
	f.wantLinked(configMapGVK, "c1-addons", refTo(cluster, false))
}

func keepsOtherReferences(t *testing.T, b Backend) {
	f := newFixture(t, b, relink.Options{})
	cluster := f.restore(backedUp(kubeenv.NewCluster(capi.V1Beta2, f.ns, "c1")))
	machine := f.restore(backedUp(kubeenv.NewMachine(capi.V1Beta2, f.ns, "c1", "m-0")))
	other := f.create(configMap(f.ns, "other", "c1"))
	item := f.restoredItem(backedUp(configMap(f.ns, "mixed", "c1"), oldRef(clusterGVK, "c1", false), oldRef(machineGVK, "m-0", true)))
	// Someone linked it to the Cluster already, made another object its
	// controller, which the backup does not record, and left a reference
	// to the Machine's backed-up UID.
	controller := metav1.OwnerReference{APIVersion: "v1", Kind: "ConfigMap", Name: "other", UID: other.GetUID(), Controller: ptr.To(true)}
	item.SetOwnerReferences([]metav1.OwnerReference{refTo(cluster, false), controller, oldRef(machineGVK, "m-0", false)})
	f.create(item)

	res, err := f.reconcile(configMapGVK, "mixed")
	if apierrors.IsConflict(err) {
		// A real API server's garbage collector drops the stale
		// reference, here between the read and the patch: the patch is
		// refused, and the next reconcile relinks.
		res, err = f.reconcile(configMapGVK, "mixed")
	} else {
		f.wantRequests(map[string]int{
			"get configmaps/mixed 200": 1, "get clusters/c1 200": 3, "get machines/m-0 200": 2, "patch configmaps/mixed 200": 1,
		})
	}
	if err != nil {
		t.Fatalf("Reconcile: %v", err)
	}
	wantResult(t, res, ctrl.Result{})
	// The stale reference gets the Machine's current UID (or, dropped by
	// the garbage collector, is appended: last either way); recorded as
	// controller, the Machine is linked without controller.
	demoted := refTo(machine, true)
	demoted.Controller = nil
	f.wantLinked(configMapGVK, "mixed", refTo(cluster, false), controller, demoted)
}

func pausedCluster(t *testing.T, b Backend) {
	f := newFixture(t, b, relink.Options{})
	paused := backedUp(kubeenv.NewCluster(capi.V1Beta2, f.ns, "c1"))
	if err := unstructured.SetNestedField(paused.Object, true, "spec", "paused"); err != nil {
		t.Fatal(err)
	}
	cluster := f.restore(paused)
	f.restore(backedUp(configMap(f.ns, "by-label", "c1"), oldRef(clusterGVK, "c1", false)))
	// Labelled with a Cluster that does not exist, but recording c1.
	f.restore(backedUp(configMap(f.ns, "by-owner", "other"), oldRef(clusterGVK, "c1", false)))

	wantResult(t, f.reconciled(configMapGVK, "by-label"), ctrl.Result{})
	f.wantRequests(map[string]int{"get configmaps/by-label 200": 1, "get clusters/c1 200": 1})
	wantResult(t, f.reconciled(configMapGVK, "by-owner"), ctrl.Result{})
	f.wantRequests(map[string]int{"get configmaps/by-owner 200": 1, "get clusters/other 404": 1, "get clusters/c1 200": 1})
	f.wantUnlinked(configMapGVK, "by-label")
	f.wantUnlinked(configMapGVK, "by-owner")
	f.wantWaiting(configMapGK)

	if err := f.c.Patch(t.Context(), cluster, client.RawPatch(types.MergePatchType, []byte(`{"spec":{"paused":false}}`))); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"by-label", "by-owner"} {
		wantResult(t, f.reconciled(configMapGVK, name), ctrl.Result{})
		f.wantLinked(configMapGVK, name, refTo(cluster, false))
	}
}

func invalidAnnotation(t *testing.T, b Backend) {
	f := newFixture(t, b, relink.Options{})
	bad := f.restoredItem(backedUp(configMap(f.ns, "bad", "c1")))
	value := `[{"kind":"Cluster"}]`
	bad.SetAnnotations(map[string]string{relink.Annotation: value})
	f.create(bad)

	_, err := f.reconcile(configMapGVK, "bad")
	if !errors.Is(err, relink.ErrInvalidAnnotation) || !errors.Is(err, reconcile.TerminalError(nil)) {
		t.Fatalf("Reconcile = %v, want a terminal error wrapping ErrInvalidAnnotation", err)
	}
	f.wantRequests(map[string]int{"get configmaps/bad 200": 1})
	_, decodeErr := relink.Decode(value)
	f.wantEvents(emitted{"Warning", relink.ReasonInvalidAnnotation,
		"Cannot read the " + relink.Annotation + " annotation, the object is not relinked: " + decodeErr.Error()})
	if got := f.get(configMapGVK, "bad").GetAnnotations()[relink.Annotation]; got != value {
		t.Errorf("annotation = %q, want it left as %q", got, value)
	}
	f.wantWaiting(configMapGK)
}

func kindNotServed(t *testing.T, b Backend) {
	f := newFixture(t, b, relink.Options{})
	owner := metav1.OwnerReference{APIVersion: "infrastructure.example.invalid/v1", Kind: "ExampleCluster", Name: "c1", UID: oldUID("ExampleCluster", "c1")}
	cm := f.restore(backedUp(configMap(f.ns, "c1-infra", "c1"), owner))
	f.at(cm, 5*time.Minute)

	wantResult(t, f.reconciled(configMapGVK, "c1-infra"), ctrl.Result{RequeueAfter: time.Second})
	f.wantRequests(map[string]int{"get configmaps/c1-infra 200": 1, "get clusters/c1 404": 1})
	f.wantUnlinked(configMapGVK, "c1-infra")
	f.wantEvents(emitted{"Warning", relink.ReasonOwnerNotFound, "Owner ExampleCluster infrastructure.example.invalid/v1 c1 " +
		"(its kind is not served by the API server) not found 5m0s after restore; the object stays unlinked and nothing is deleted until it is restored"})
	f.wantWaiting(configMapGK, "c1-infra")
}

func nothingToDo(t *testing.T, b Backend) {
	f := newFixture(t, b, relink.Options{})
	wantResult(t, f.reconciled(configMapGVK, "gone"), ctrl.Result{})
	f.wantRequests(map[string]int{"get configmaps/gone 404": 1})

	// Secrets are not among the default kinds.
	_, err := f.reconcile(schema.GroupVersionKind{Version: "v1", Kind: "Secret"}, "s")
	if !errors.Is(err, reconcile.TerminalError(nil)) || !strings.Contains(err.Error(), "kind is not relinked") {
		t.Fatalf("Reconcile of a Secret = %v, want a terminal error", err)
	}
	f.wantRequests(map[string]int{})
	f.wantEvents()
}

func configuredKindNotServed(t *testing.T, b Backend) {
	c, _, _ := b.New(t)
	kinds, err := relink.ParseKinds("Machine.cluster.x-k8s.io,ExampleMachine.infrastructure.example.invalid")
	if err != nil {
		t.Fatal(err)
	}
	_, err = relink.NewForClient(relink.Options{Kinds: kinds}, c, &kubeenv.Recorder{})
	if err == nil || !strings.Contains(err.Error(), "kind ExampleMachine.infrastructure.example.invalid is not served") {
		t.Fatalf("NewForClient = %v, want an error naming the kind", err)
	}
}
