package kubeenv_test

import (
	"context"
	"fmt"
	"net/http"
	"os/exec"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/rest"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	"github.com/initlock/initlock/internal/kubeenv"
	"github.com/initlock/initlock/internal/kubeenv/velerosim"
	"github.com/initlock/initlock/pkg/initlock/capi"
)

func TestClassify(t *testing.T) {
	for _, tt := range []struct {
		method, url string
		want        kubeenv.Request
	}{
		{"GET", "/api/v1/namespaces/a/configmaps/c1-lock", kubeenv.Request{Verb: "get", Version: "v1", Resource: "configmaps", Namespace: "a", Name: "c1-lock"}},
		{"GET", "/api/v1/namespaces/a/configmaps", kubeenv.Request{Verb: "list", Version: "v1", Resource: "configmaps", Namespace: "a"}},
		{"GET", "/api/v1/namespaces/a/configmaps?watch=true", kubeenv.Request{Verb: "watch", Version: "v1", Resource: "configmaps", Namespace: "a"}},
		{"POST", "/api/v1/namespaces/a/configmaps", kubeenv.Request{Verb: "create", Version: "v1", Resource: "configmaps", Namespace: "a"}},
		{"PATCH", "/api/v1/namespaces/a/secrets/c1-lock", kubeenv.Request{Verb: "patch", Version: "v1", Resource: "secrets", Namespace: "a", Name: "c1-lock"}},
		{"POST", "/apis/events.k8s.io/v1/namespaces/a/events", kubeenv.Request{Verb: "create", Group: "events.k8s.io", Version: "v1", Resource: "events", Namespace: "a"}},
		{"PUT", "/apis/cluster.x-k8s.io/v1beta2/namespaces/a/clusters/c1/status", kubeenv.Request{Verb: "update", Group: "cluster.x-k8s.io", Version: "v1beta2", Resource: "clusters/status", Namespace: "a", Name: "c1"}},
		{"DELETE", "/api/v1/namespaces/a", kubeenv.Request{Verb: "delete", Version: "v1", Resource: "namespaces", Namespace: "a"}},
		{"GET", "/apis/cluster.x-k8s.io/v1beta2", kubeenv.Request{Verb: "discovery", Group: "cluster.x-k8s.io", Version: "v1beta2"}},
	} {
		req, err := http.NewRequestWithContext(t.Context(), tt.method, "https://apiserver.test"+tt.url, nil)
		if err != nil {
			t.Fatal(err)
		}
		if got := kubeenv.Classify(req); got != tt.want {
			t.Errorf("Classify(%s %s) = %+v, want %+v", tt.method, tt.url, got, tt.want)
		}
	}
}

// TestCounter counts a client's requests by verb, resource, namespace and
// answer, and keeps the ones authorisation refused.
func TestCounter(t *testing.T) {
	ctx := t.Context()
	ns := env.Namespace(t)
	var counter kubeenv.Counter
	c, err := client.New(counter.CountingConfig(env.Config), client.Options{Scheme: kubeenv.Scheme()})
	if err != nil {
		t.Fatal(err)
	}
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "a"}}
	if err := c.Create(ctx, cm); err != nil {
		t.Fatal(err)
	}
	stale := cm.DeepCopy()
	cm.Data = map[string]string{"k": "v"}
	if err := c.Update(ctx, cm); err != nil {
		t.Fatal(err)
	}
	if err := c.Update(ctx, stale); !apierrors.IsConflict(err) {
		t.Fatalf("update with a stale resourceVersion: %v, want a conflict", err)
	}
	if err := c.Get(ctx, client.ObjectKeyFromObject(cm), cm); err != nil {
		t.Fatal(err)
	}
	if got := counter.Of("configmaps", ns).Writes(); got != 3 {
		t.Errorf("configmap writes = %d, want 3:\n%s", got, &counter)
	}
	if got, want := counter.Writes(), 3; got != want {
		t.Errorf("writes = %d, want %d", got, want)
	}
	if got := counter.Of("configmaps", "elsewhere").Writes(); got != 0 {
		t.Errorf("writes in another namespace = %d, want 0", got)
	}
	if got := counter.Reads(); got != 1 {
		t.Errorf("reads = %d, want 1", got)
	}
	conflicts := 0
	for call, n := range counter.Calls() {
		if call.Status == http.StatusConflict {
			conflicts += n
			if call.Verb != "update" || call.Name != "a" {
				t.Errorf("conflict on %+v, want the update of a", call)
			}
		}
	}
	if conflicts != 1 {
		t.Errorf("conflicts = %d, want 1:\n%s", conflicts, &counter)
	}
	counter.Reset()
	if got := counter.Count(kubeenv.WriteVerbs...); got != 0 {
		t.Errorf("writes after Reset = %d", got)
	}

	// A user without any RBAC is refused.
	nobody, err := env.AddUser("nobody-"+ns, nil)
	if err != nil {
		t.Fatal(err)
	}
	nc, err := client.New(counter.CountingConfig(nobody), client.Options{Scheme: kubeenv.Scheme()})
	if err != nil {
		t.Fatal(err)
	}
	if err := nc.Get(ctx, client.ObjectKeyFromObject(cm), &corev1.ConfigMap{}); !apierrors.IsForbidden(err) {
		t.Fatalf("get without RBAC: %v, want forbidden", err)
	}
	if d := counter.Denied(); len(d) != 1 || !strings.HasPrefix(d[0], "GET /api/v1/namespaces/"+ns+"/configmaps/a: ") {
		t.Errorf("denied = %q, want the get of a", d)
	}
}

// TestLockAndStatus: GetLock reads a lock or nil, LockGone sees it go, and
// SetInitialized writes what Cluster API reports for both versions.
func TestLockAndStatus(t *testing.T) {
	ctx := t.Context()
	ns := env.Namespace(t)
	if cm, err := kubeenv.GetLock(ctx, env.Client, ns, "c1"); cm != nil || err != nil {
		t.Fatalf("GetLock before the lock = %v, %v, want nil, nil", cm, err)
	}
	if err := kubeenv.LockGone(ctx, env.Client, ns, "c1")(); err != nil {
		t.Fatal(err)
	}
	cluster := kubeenv.NewCluster(capi.V1Beta2, ns, "c1")
	if err := env.Client.Create(ctx, cluster); err != nil {
		t.Fatal(err)
	}
	if err := env.Client.Create(ctx, kubeenv.NewLock(ns, "c1", "m1", cluster)); err != nil {
		t.Fatal(err)
	}
	cm := kubeenv.MustGetLock(t, env.Client, ns, "c1")
	if err := kubeenv.LockOwnedBy(cm, cluster); err != nil {
		t.Fatal(err)
	}
	if err := kubeenv.LockGone(ctx, env.Client, ns, "c1")(); err == nil {
		t.Fatal("LockGone holds while the lock exists")
	}
	if err := kubeenv.LockOwnedBy(nil, cluster); err == nil {
		t.Fatal("LockOwnedBy holds for no lock")
	}

	for _, version := range []string{capi.V1Beta2, capi.V1Beta1} {
		u := kubeenv.NewCluster(version, ns, "init-"+version)
		if err := env.Client.Create(ctx, u); err != nil {
			t.Fatal(err)
		}
		if err := kubeenv.SetInitialized(ctx, env.Client, u); err != nil {
			t.Fatal(err)
		}
		live := &unstructured.Unstructured{}
		live.SetGroupVersionKind(u.GroupVersionKind())
		if err := env.Client.Get(ctx, client.ObjectKeyFromObject(u), live); err != nil {
			t.Fatal(err)
		}
		if !capi.IsControlPlaneInitialized(live) || !capi.IsControlPlaneInitialized(u) {
			t.Errorf("%s: not initialised after SetInitialized: %v", version, live.Object["status"])
		}
	}
}

// TestStartManager runs a manager, counts its requests and stops it when
// asked.
func TestStartManager(t *testing.T) {
	rm := kubeenv.StartManager(t, env.Config, func(cfg *rest.Config) (ctrl.Manager, error) {
		return ctrl.NewManager(cfg, ctrl.Options{Scheme: kubeenv.Scheme(), Metrics: metricsserver.Options{BindAddress: "0"}})
	})
	if _, err := rm.Manager.GetCache().GetInformer(t.Context(), &corev1.ConfigMap{}); err != nil {
		t.Fatal(err)
	}
	rm.WaitForCacheSync(t)
	if rm.Counter.Of("configmaps", "").Count("list", "watch") == 0 {
		t.Errorf("the manager's list and watch of ConfigMaps were not counted:\n%s", rm.Counter)
	}
	rm.Stop()
	if err := rm.Err(); err != nil {
		t.Fatal(err)
	}
}

// TestProcess: a process runs in its own group, its output goes to its
// log, Stop ends it, and Terminate sees it exit cleanly on SIGTERM.
func TestProcess(t *testing.T) {
	p, err := kubeenv.StartLogged("sh", exec.Command("sh", "-c", "echo started; sleep 60 & wait"), t.TempDir()+"/sh.log")
	if err != nil {
		t.Fatal(err)
	}
	kubeenv.Eventually(t, 10*time.Second, func() error {
		if !strings.Contains(p.Log(), "started") {
			return fmt.Errorf("log = %q", p.Log())
		}
		return nil
	})
	if pgid, err := syscall.Getpgid(p.Pid()); err != nil || pgid != p.Pid() {
		t.Errorf("process group = %d, %v, want its own (%d)", pgid, err, p.Pid())
	}
	p.Stop()
	if !p.Exited() {
		t.Fatal("still running after Stop")
	}

	q := kubeenv.StartProcess(t, "trap", exec.Command("sh", "-c", `trap "exit 0" TERM; echo ready; while :; do sleep 0.1; done`))
	kubeenv.Eventually(t, 10*time.Second, func() error {
		if q.Tail(1) != "ready" {
			return fmt.Errorf("tail = %q", q.Tail(1))
		}
		return nil
	})
	q.Terminate(t, 10*time.Second)
}

// TestRestoreWorkers: with Workers, the simulator restores the same
// objects, each resource after the one before it in Velero's order.
func TestRestoreWorkers(t *testing.T) {
	ns := env.Namespace(t)
	var objs []client.Object
	for _, c := range []string{"c1", "c2", "c3", "c4"} {
		objs = append(objs, kubeenv.NewCluster(capi.V1Beta2, ns, c), kubeenv.NewMachine(capi.V1Beta2, ns, c, c+"-cp-0"),
			kubeenv.NewLock(ns, c, c+"-cp-0", nil))
	}
	out := velerosim.Restore(t, env.Config, velerosim.Options{Workers: 3}, objs...)
	var kinds, names []string
	for _, u := range out {
		if len(kinds) == 0 || kinds[len(kinds)-1] != u.GetKind() {
			kinds = append(kinds, u.GetKind())
		}
		names = append(names, u.GetKind()+"/"+u.GetName())
		if u.GetUID() == "" || u.GetLabels()["velero.io/restore-name"] != "restore-1" {
			t.Errorf("%s/%s not restored as Velero does: uid %q, labels %v", u.GetKind(), u.GetName(), u.GetUID(), u.GetLabels())
		}
	}
	if want := []string{"ConfigMap", "Machine", "Cluster"}; !slices.Equal(kinds, want) {
		t.Errorf("kinds restored in the order %v, want %v", kinds, want)
	}
	if len(names) != len(objs) {
		t.Errorf("restored %v, want %d objects", names, len(objs))
	}
}

// TestBackupSkipsObjectsBeingDeleted: as Velero does, Backup leaves out an
// object being deleted (held back by a finalizer); List keeps it.
func TestBackupSkipsObjectsBeingDeleted(t *testing.T) {
	ns := env.Namespace(t)
	held := kubeenv.NewLock(ns, "c1", "c1-cp-0", nil)
	held.Finalizers = []string{"example.com/keep"}
	kept := kubeenv.NewLock(ns, "c2", "c2-cp-0", nil)
	for _, cm := range []*corev1.ConfigMap{held, kept} {
		if err := env.Client.Create(t.Context(), cm); err != nil {
			t.Fatal(err)
		}
	}
	t.Cleanup(func() {
		_ = env.Client.Patch(context.WithoutCancel(t.Context()), held, client.RawPatch(types.MergePatchType, []byte(`{"metadata":{"finalizers":null}}`)))
	})
	if err := env.Client.Delete(t.Context(), held.DeepCopy()); err != nil {
		t.Fatal(err)
	}
	cms := corev1.SchemeGroupVersion.WithKind("ConfigMap")
	names := func(objs []*unstructured.Unstructured, err error) []string {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
		var out []string
		for _, u := range objs {
			out = append(out, u.GetName())
		}
		slices.Sort(out)
		return out
	}
	if got, want := names(velerosim.Backup(t.Context(), env.Client, ns, cms)), []string{"c2-lock"}; !slices.Equal(got, want) {
		t.Errorf("Backup = %v, want %v: the lock being deleted is skipped", got, want)
	}
	if got, want := names(velerosim.List(t.Context(), env.Client, ns, cms)), []string{"c1-lock", "c2-lock"}; !slices.Equal(got, want) {
		t.Errorf("List = %v, want %v", got, want)
	}
}

// TestMetrics reads the API server's metrics with Prometheus's parser: a
// ConfigMap's create shows in apiserver_request_total and in the admission
// time of the ValidatingAdmissionPolicy plugin.
func TestMetrics(t *testing.T) {
	ctx := t.Context()
	ns := env.Namespace(t)
	creates := func() float64 {
		m, err := env.Metrics(ctx)
		if err != nil {
			t.Fatal(err)
		}
		var n float64
		m.Each("apiserver_request_total", func(l map[string]string, s *dto.Metric) {
			if l["verb"] == "POST" && l["resource"] == "configmaps" {
				n += s.GetCounter().GetValue()
			}
		})
		return n
	}
	before, admittedBefore := creates(), admissionCreates(t)
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "metrics"}}
	if err := env.Client.Create(ctx, cm); err != nil {
		t.Fatal(err)
	}
	if d := creates() - before; d < 1 {
		t.Errorf("apiserver_request_total of ConfigMap creates rose by %g, want at least 1", d)
	}
	if d := admissionCreates(t) - admittedBefore; d < 1 {
		t.Errorf("ValidatingAdmissionPolicy's CREATE requests rose by %g, want at least 1", d)
	}
}

func admissionCreates(t *testing.T) float64 {
	t.Helper()
	times, err := env.AdmissionTimes(t.Context(), "ValidatingAdmissionPolicy")
	if err != nil {
		t.Fatal(err)
	}
	return times["CREATE"].Requests
}
