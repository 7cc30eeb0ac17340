package relinksuite

import (
	"context"
	"fmt"
	"net/http"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"github.com/prometheus/client_golang/prometheus"
	riav2 "github.com/vmware-tanzu/velero/pkg/plugin/velero/restoreitemaction/v2"
	eventsv1 "k8s.io/api/events/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/config"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	"github.com/initlock/initlock/internal/kubeenv"
	"github.com/initlock/initlock/internal/kubeenv/velerosim"
	"github.com/initlock/initlock/internal/relink"
	"github.com/initlock/initlock/internal/velero"
	"github.com/initlock/initlock/pkg/initlock/capi"
)

var env *kubeenv.Env

// allNamespaces, as the namespace given to start, runs the relinker on
// every namespace.
const allNamespaces = "*"

func TestMain(m *testing.M) {
	ctrl.SetLogger(logr.Discard())
	kubeenv.Main(m, kubeenv.Options{}, &env)
}

type harness struct {
	relinker *relink.Relinker
	// rm runs the manager and counts its requests.
	rm       *kubeenv.Running
	registry *prometheus.Registry
}

// objectWrites counts the write requests other than those for Events.
func (h *harness) objectWrites() int {
	return h.rm.Counter.Writes() - h.rm.Counter.Of("events", "").Writes()
}

// patchesPerObject counts the object writes by object; every one must be
// a PATCH.
func (h *harness) patchesPerObject(t *testing.T) map[string]int {
	t.Helper()
	out := map[string]int{}
	for call, n := range h.rm.Counter.Calls() {
		if !slices.Contains(kubeenv.WriteVerbs, call.Verb) || call.Resource == "events" {
			continue
		}
		if call.Verb != "patch" {
			t.Errorf("unexpected write: %d %s of %s %s/%s", n, call.Verb, call.Resource, call.Namespace, call.Name)
			continue
		}
		out[objectOf(call)] += n
	}
	return out
}

// conflictsPerObject returns, by object, the writes refused with 409
// Conflict.
func (h *harness) conflictsPerObject() map[string]int {
	out := map[string]int{}
	for call, n := range h.rm.Counter.Calls() {
		if call.Status == http.StatusConflict {
			out[objectOf(call)] += n
		}
	}
	return out
}

// objectOf names the object of a request: "group/version resource
// namespace/name".
func objectOf(call kubeenv.Call) string {
	return call.Group + "/" + call.Version + " " + call.Resource + " " + call.Namespace + "/" + call.Name
}

// start runs a manager with only the relinker, restricted to ns unless
// opts says otherwise, until the test ends.
func start(t testing.TB, ns string, opts relink.Options) *harness {
	t.Helper()
	return startAs(t, env.Config, ns, opts)
}

// startAs is start with the given credentials.
func startAs(t testing.TB, cfg *rest.Config, ns string, opts relink.Options) *harness {
	t.Helper()
	h := &harness{registry: prometheus.NewRegistry()}
	if opts.Namespace == "" {
		opts.Namespace = ns
	}
	if opts.Namespace == allNamespaces {
		opts.Namespace = ""
	}
	opts.Registry = h.registry
	h.relinker = relink.New(opts)
	h.rm = kubeenv.StartManager(t, cfg, func(cfg *rest.Config) (ctrl.Manager, error) {
		mgr, err := ctrl.NewManager(cfg, ctrl.Options{
			Scheme:                 kubeenv.Scheme(),
			Metrics:                metricsserver.Options{BindAddress: "0"},
			HealthProbeBindAddress: "0",
			Controller:             config.Controller{SkipNameValidation: ptr.To(true)},
			Logger:                 logr.Discard(),
		})
		if err != nil {
			return nil, err
		}
		if err := h.relinker.SetupWithManager(t.Context(), mgr); err != nil {
			return nil, fmt.Errorf("setting up the relinker: %w", err)
		}
		return mgr, nil
	})
	syncCtx, stop := context.WithTimeout(t.Context(), time.Minute)
	defer stop()
	if !h.relinker.WaitForCacheSync(syncCtx) {
		t.Fatal("the relinker's cache did not sync")
	}
	return h
}

// metric returns the value of a metric of the relinker for kind.
func (h *harness) metric(t testing.TB, name string, gk schema.GroupKind) float64 {
	t.Helper()
	v, ok, err := gathered(h.registry, name, map[string]string{"group": gk.Group, "kind": gk.Kind})
	if err != nil || !ok {
		t.Fatalf("no metric %s for %s (%v)", name, gk, err)
	}
	return v
}

// waitMetric waits until the relinker's metric name for ConfigMaps is
// want.
func (h *harness) waitMetric(t testing.TB, timeout time.Duration, name string, want float64) {
	t.Helper()
	kubeenv.Eventually(t, timeout, func() error {
		if got := h.metric(t, name, configMapGK); got != want {
			return fmt.Errorf("%s{ConfigMap} = %v, want %v", name, got, want)
		}
		return nil
	})
}

// events returns the reasons of the Events about the named object.
func events(t testing.TB, ns, name string) []string {
	t.Helper()
	var list eventsv1.EventList
	if err := env.Client.List(t.Context(), &list, client.InNamespace(ns)); err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, e := range list.Items {
		if e.Regarding.Name == name {
			out = append(out, e.Type+" "+e.Reason+": "+e.Note)
		}
	}
	slices.Sort(out)
	return out
}

func capiGVK(kind string) schema.GroupVersionKind {
	return schema.GroupVersionKind{Group: capi.Group, Version: env.CAPIVersion, Kind: kind}
}

var secretGVK = schema.GroupVersionKind{Version: "v1", Kind: "Secret"}

func create(t testing.TB, u *unstructured.Unstructured) *unstructured.Unstructured {
	t.Helper()
	if err := env.Client.Create(t.Context(), u); err != nil {
		t.Fatalf("creating %s %s/%s: %v", u.GetKind(), u.GetNamespace(), u.GetName(), err)
	}
	return u
}

func get(t testing.TB, gvk schema.GroupVersionKind, ns, name string) *unstructured.Unstructured {
	t.Helper()
	u := &unstructured.Unstructured{}
	u.SetGroupVersionKind(gvk)
	if err := env.Client.Get(t.Context(), client.ObjectKey{Namespace: ns, Name: name}, u); err != nil {
		t.Fatalf("reading %s %s/%s: %v", gvk.Kind, ns, name, err)
	}
	return u
}

// restoredConfigMap is a ConfigMap of cluster as a Velero restore with
// initlock's plugin leaves it, made by the project's simulator of that
// restore (velerosim) from backedUpConfigMap.
func restoredConfigMap(t testing.TB, ns, name, cluster string, owners ...relink.OwnerRef) *unstructured.Unstructured {
	t.Helper()
	u, err := pluginRestorer(t).Item(backedUpConfigMap(ns, name, cluster, owners...))
	if err != nil {
		t.Fatalf("restoring ConfigMap %s: %v", name, err)
	}
	return u
}

// backedUpConfigMap is a ConfigMap of cluster as backed up, with an
// ownerReference to each of owners (to UIDs that no longer exist).
func backedUpConfigMap(ns, name, cluster string, owners ...relink.OwnerRef) *unstructured.Unstructured {
	refs := make([]metav1.OwnerReference, 0, len(owners))
	for i, o := range owners {
		refs = append(refs, metav1.OwnerReference{APIVersion: o.APIVersion, Kind: o.Kind, Name: o.Name,
			UID: types.UID(fmt.Sprintf("0d1d0000-0000-4000-8000-%012d", i)), Controller: o.Controller, BlockOwnerDeletion: o.BlockOwnerDeletion})
	}
	return backedUp(configMap(ns, name, cluster), refs...)
}

// restored returns u, an object not yet created, as the restore of
// restoredConfigMap creates it: labelled with that restore, so that the
// link rule proves it the owner of the objects restored with it.
func restored(t testing.TB, u *unstructured.Unstructured) *unstructured.Unstructured {
	t.Helper()
	out, err := pluginRestorer(t).Item(u)
	if err != nil {
		t.Fatalf("restoring %s %s: %v", u.GetKind(), u.GetName(), err)
	}
	return out
}

// pluginActions are the restore item actions of initlock's Velero plugin,
// with their default configuration.
func pluginActions() []riav2.RestoreItemAction {
	cfg := velero.DefaultConfig()
	return []riav2.RestoreItemAction{velero.NewAction(cfg, false, nil), velero.NewAction(cfg, true, nil)}
}

var (
	restorerOnce sync.Once
	restorer     *velerosim.Restorer
	restorerErr  error
)

// pluginRestorer is a velerosim restorer running initlock's plugin, made
// once for the package.
func pluginRestorer(t testing.TB) *velerosim.Restorer {
	t.Helper()
	restorerOnce.Do(func() {
		restorer, restorerErr = velerosim.New(env.Config, velerosim.Options{Actions: pluginActions(), RestoreName: restoreName})
	})
	if restorerErr != nil {
		t.Fatal(restorerErr)
	}
	return restorer
}

func clusterOwner(name string) relink.OwnerRef {
	return relink.OwnerRef{APIVersion: capi.Group + "/" + env.CAPIVersion, Kind: "Cluster", Name: name}
}

func controllerOwner(kind, name string) relink.OwnerRef {
	return relink.OwnerRef{APIVersion: capi.Group + "/" + env.CAPIVersion, Kind: kind, Name: name,
		Controller: ptr.To(true), BlockOwnerDeletion: ptr.To(true)}
}

// linked returns nil once obj carries exactly want as ownerReferences and
// no longer the annotation.
func linked(t testing.TB, gvk schema.GroupVersionKind, ns, name string, want ...metav1.OwnerReference) func() error {
	return func() error {
		u := get(t, gvk, ns, name)
		if v, ok := u.GetAnnotations()[relink.Annotation]; ok {
			return fmt.Errorf("%s %s still has the annotation %s; ownerReferences %v", gvk.Kind, name, v, u.GetOwnerReferences())
		}
		if got := u.GetOwnerReferences(); !equalRefs(got, want) {
			return fmt.Errorf("%s %s ownerReferences = %v, want %v", gvk.Kind, name, got, want)
		}
		return nil
	}
}

// equalRefs tells whether a and b are the same references, flags included.
func equalRefs(a, b []metav1.OwnerReference) bool {
	return slices.Equal(refStrings(a), refStrings(b))
}

// machineGroup returns a valid MachineSet or MachineDeployment (kind) of
// cluster, not yet created.
func machineGroup(kind, ns, cluster, name string) *unstructured.Unstructured {
	return kubeenv.NewMachineGroup(kind, env.CAPIVersion, ns, cluster, name)
}

// The relinker's reconcile cases against the real API server, with a
// client that reads and writes it directly; internal/relink runs them
// against the model.

func apiServer() Backend {
	return Backend{
		New: func(t *testing.T) (client.Client, string, *kubeenv.Counter) {
			t.Helper()
			counter := &kubeenv.Counter{}
			c, err := client.New(counter.CountingConfig(env.Config), client.Options{Scheme: kubeenv.Scheme()})
			if err != nil {
				t.Fatal(err)
			}
			return c, env.Namespace(t), counter
		},
		Collects: true,
	}
}

func TestReconcileOnAPIServer(t *testing.T) { Reconcile(t, apiServer()) }

func TestPendingOnAPIServer(t *testing.T) { Pending(t, apiServer()) }
