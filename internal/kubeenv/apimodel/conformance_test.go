package apimodel_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/initlock/initlock/internal/kubeenv"
	"github.com/initlock/initlock/internal/kubeenv/apimodel"
	"github.com/initlock/initlock/internal/kubeenv/wire"
	"github.com/initlock/initlock/pkg/initlock/capi"
)

var env *kubeenv.Env

// TestMain starts the API server with the project's lock guard installed,
// as the manager installs it; the model enforces the same policy
// (apimodel.LockGuard).
func TestMain(m *testing.M) {
	kubeenv.Main(m, kubeenv.Options{LockGuard: true}, &env)
}

// backend is one side of the comparison: the model or the API server.
type backend struct {
	c  client.Client
	ns string
	// collect deletes the lock as the garbage collector does: with its
	// UID and the resourceVersion read as preconditions and a propagation
	// policy, as a user the lock guard does not know by name.
	collect func(ctx context.Context, b *backend) error
	// uid and rv remember what earlier steps read, per object.
	uid map[string]types.UID
	rv  map[string]string
	// changed tells whether the last patch of the lock gave it a new
	// resourceVersion.
	changed bool
	// listed is what the last list answered (describeList), listRV its
	// resourceVersion; wrote tells the next list that a write was made
	// since.
	listed []string
	listRV int64
	wrote  bool
}

// step is one request of a script, made the same way against both backends.
type step struct {
	name string
	do   func(ctx context.Context, b *backend) error
}

const register = "/metadata/annotations/" + "initlock.dev~1init-lock-grant"

// scripts are the requests the lock protocol makes, with the outcomes that
// matter: writes that apply, and writes that a test, a precondition or a
// taken name refuses.
var scripts = map[string][]step{
	"list": listScript,
	"grant register": {
		{"create the cluster", func(ctx context.Context, b *backend) error {
			return b.create(ctx, kubeenv.NewCluster(capi.V1Beta2, b.ns, "c1"))
		}},
		{"claim with no annotations map", jsonPatch(`[{"op":"test","path":"/metadata/uid","value":"$uid"},{"op":"test","path":"/spec/paused","value":null},{"op":"test","path":"/metadata/annotations","value":null},{"op":"add","path":"/metadata/annotations","value":{"initlock.dev/init-lock-grant":"g1"}}]`)},
		{"the same claim again fails its test", jsonPatch(`[{"op":"test","path":"/metadata/annotations","value":null},{"op":"add","path":"/metadata/annotations","value":{"initlock.dev/init-lock-grant":"g1"}}]`)},
		{"compare-and-swap from the value read", jsonPatch(`[{"op":"test","path":"/metadata/uid","value":"$uid"},{"op":"test","path":"/spec/paused","value":null},{"op":"test","path":"/metadata/annotations/cluster.x-k8s.io~1paused","value":null},{"op":"test","path":"` + register + `","value":"g1"},{"op":"replace","path":"` + register + `","value":"g2"}]`)},
		{"compare-and-swap from a stale value fails", jsonPatch(`[{"op":"test","path":"` + register + `","value":"g1"},{"op":"replace","path":"` + register + `","value":"g3"}]`)},
		{"a test of another uid fails", jsonPatch(`[{"op":"test","path":"/metadata/uid","value":"not-the-uid"},{"op":"replace","path":"` + register + `","value":"g3"}]`)},
		{"remove the register", jsonPatch(`[{"op":"test","path":"` + register + `","value":"g2"},{"op":"remove","path":"` + register + `"}]`)},
		{"another tool's annotation", mergePatch(`{"metadata":{"annotations":{"example.com/x":"y"}}}`)},
		{"add when the key is absent", jsonPatch(`[{"op":"test","path":"` + register + `","value":null},{"op":"add","path":"` + register + `","value":"g4"}]`)},
		{"pause", mergePatch(`{"spec":{"paused":true}}`)},
		{"a claim testing spec.paused absent fails", jsonPatch(`[{"op":"test","path":"/spec/paused","value":null},{"op":"replace","path":"` + register + `","value":"g5"}]`)},
		{"a claim testing spec.paused false fails", jsonPatch(`[{"op":"test","path":"/spec/paused","value":false},{"op":"replace","path":"` + register + `","value":"g5"}]`)},
		{"unpause", mergePatch(`{"spec":{"paused":false}}`)},
		{"a claim testing spec.paused false applies", jsonPatch(`[{"op":"test","path":"/spec/paused","value":false},{"op":"replace","path":"` + register + `","value":"g5"}]`)},
		{"pause by annotation", mergePatch(`{"metadata":{"annotations":{"cluster.x-k8s.io/paused":""}}}`)},
		{"a claim testing the paused annotation absent fails", jsonPatch(`[{"op":"test","path":"/metadata/annotations/cluster.x-k8s.io~1paused","value":null},{"op":"replace","path":"` + register + `","value":"g6"}]`)},
		{"a status patched through the object is ignored", mergePatch(`{"status":{"initialization":{"controlPlaneInitialized":true}}}`)},
	},
	"lock": {
		{"read a missing lock", func(ctx context.Context, b *backend) error {
			return b.c.Get(ctx, client.ObjectKey{Namespace: b.ns, Name: "c1-lock"}, &corev1.ConfigMap{})
		}},
		{"create the lock", createLock},
		{"create it again", createLock},
		{"patch with the resourceVersion read", func(ctx context.Context, b *backend) error { return b.patchLock(ctx, "a", b.rv["c1-lock"]) }},
		{"patch with a stale resourceVersion", func(ctx context.Context, b *backend) error { return b.patchLock(ctx, "b", "1") }},
		{"a patch that changes nothing", func(ctx context.Context, b *backend) error { return b.patchLock(ctx, "a", b.rv["c1-lock"]) }},
		{"delete with another UID", func(ctx context.Context, b *backend) error {
			uid := types.UID("not-the-uid")
			rv := b.rv["c1-lock"]
			return b.deleteLock(ctx, &uid, &rv)
		}},
		{"delete with a stale resourceVersion", deleteLockStale},
		{"delete with the UID and resourceVersion read", deleteLockAsRead},
		{"delete a missing lock", deleteLockPlain},
	},
	"guarded lock": {
		{"create the lock", createLock},
		{"delete it unmarked: refused by the guard", deleteLockPlain},
		{"mark it with another UID", lockJSONPatch(`[{"op":"add","path":"/metadata/annotations","value":{"initlock.dev/releasable":"not-the-uid"}}]`)},
		{"delete it with a mark of another UID: refused", deleteLockPlain},
		{"take its label away: refused", lockJSONPatch(`[{"op":"remove","path":"/metadata/labels/cluster.x-k8s.io~1cluster-name"}]`)},
		{"label it for another cluster: refused", lockJSONPatch(`[{"op":"replace","path":"/metadata/labels/cluster.x-k8s.io~1cluster-name","value":"c2"}]`)},
		{"take its data key away: refused", lockJSONPatch(`[{"op":"remove","path":"/data/lock-information"}]`)},
		{"rewrite its record: let through", lockJSONPatch(`[{"op":"replace","path":"/data/lock-information","value":"{\"machineName\":\"m2\"}"}]`)},
		{"mark it with its own UID", lockJSONPatch(`[{"op":"test","path":"/metadata/resourceVersion","value":"$rv"},{"op":"replace","path":"/metadata/annotations/initlock.dev~1releasable","value":"$lockuid"}]`)},
		{"delete it marked, with a stale resourceVersion: the precondition answers first", deleteLockStale},
		{"delete it marked, with the UID and resourceVersion read", deleteLockAsRead},
		{"create it again", createLock},
		{"clusterctl move marks it for deletion in the source", lockJSONPatch(`[{"op":"add","path":"/metadata/annotations","value":{"clusterctl.cluster.x-k8s.io/delete-for-move":""}}]`)},
		{"the garbage collector's delete of it: refused (it names a propagation policy)", func(ctx context.Context, b *backend) error { return b.collect(ctx, b) }},
		{"kubectl delete of it: refused (it names a propagation policy)", kubectlDelete},
		{"clusterctl move deletes it", deleteLockPlain},
		{"a ConfigMap of the lock's name for another cluster", func(ctx context.Context, b *backend) error {
			cm := kubeenv.NewLock(b.ns, "c1", "m1", nil)
			cm.Labels[wire.ClusterNameLabel] = "c2"
			return b.c.Create(ctx, cm)
		}},
		{"is not a lock: deleted", deleteLockPlain},
		{"a ConfigMap of the lock's name without its data key", func(ctx context.Context, b *backend) error {
			cm := kubeenv.NewLock(b.ns, "c1", "m1", nil)
			cm.Data = map[string]string{"other": "x"}
			return b.c.Create(ctx, cm)
		}},
		{"is not a lock either: deleted", deleteLockPlain},
		{"another provider's lock, its record naming no machineName (KubeKey's)", func(ctx context.Context, b *backend) error {
			cm := kubeenv.NewLock(b.ns, "c1", "m1", nil)
			cm.Data[wire.DataKey] = `{"kkInstanceName":"kk-0"}`
			return b.create(ctx, cm)
		}},
		{"kubectl delete of it: let through, left to its provider", kubectlDelete},
		{"a lock whose record spells MachineName otherwise, as Go's decoders read it", func(ctx context.Context, b *backend) error {
			cm := kubeenv.NewLock(b.ns, "c1", "m1", nil)
			cm.Data[wire.DataKey] = `{"MachineName" : "m1"}`
			return b.create(ctx, cm)
		}},
		{"delete it unmarked: refused", deleteLockPlain},
		{"rewrite its record for another provider: refused (the shape goes)", lockJSONPatch(`[{"op":"replace","path":"/data/lock-information","value":"{\"kkInstanceName\":\"kk-0\"}"}]`)},
		{"rewrite its record with its key's letters escaped, as a resource modifier may: let through (the same record)", lockJSONPatch(`[{"op":"replace","path":"/data/lock-information","value":"{\"machine\\u004eame\":\"m1\"}"}]`)},
		{"delete it unmarked: refused", deleteLockPlain},
	},
	"replayed mark": {
		{"create the lock", createLock},
		{"a release marks it with its own UID", lockJSONPatch(`[{"op":"test","path":"/metadata/resourceVersion","value":"$rv"},{"op":"add","path":"/metadata/annotations","value":{"initlock.dev/releasable":"$lockuid","initlock.dev/release-started":"2026-12-06T10:00:00Z"}}]`)},
		{"the mark is taken off", lockJSONPatch(`[{"op":"remove","path":"/metadata/annotations/initlock.dev~1releasable"},{"op":"remove","path":"/metadata/annotations/initlock.dev~1release-started"}]`)},
		{"a restore with the update policy writes the mark back", lockMergePatch(`{"metadata":{"annotations":{"initlock.dev/releasable":"$lockuid","initlock.dev/release-started":"2026-12-06T10:00:00Z"},"labels":{"velero.io/restore-name":"r1"}}}`)},
		{"a plain delete: refused (no resourceVersion named)", deleteLockPlain},
		{"a delete with the UID alone: refused", func(ctx context.Context, b *backend) error {
			uid := b.uid["c1-lock"]
			return b.deleteLock(ctx, &uid, nil)
		}},
		{"kubectl delete: refused", kubectlDelete},
		{"the garbage collector's delete, on the current resourceVersion: refused", func(ctx context.Context, b *backend) error { return b.collect(ctx, b) }},
		{"a delete on the current resourceVersion with a propagation policy: refused", func(ctx context.Context, b *backend) error {
			uid, rv := b.uid["c1-lock"], b.rv["c1-lock"]
			cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: b.ns, Name: "c1-lock"}}
			return b.c.Delete(ctx, cm, client.Preconditions{UID: &uid, ResourceVersion: &rv}, client.PropagationPolicy(metav1.DeletePropagationOrphan))
		}},
		{"a delete on the current resourceVersion with the deprecated orphanDependents: refused", func(ctx context.Context, b *backend) error {
			uid, rv := b.uid["c1-lock"], b.rv["c1-lock"]
			cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: b.ns, Name: "c1-lock"}}
			orphan := true
			return b.c.Delete(ctx, cm, &client.DeleteOptions{Preconditions: &metav1.Preconditions{UID: &uid, ResourceVersion: &rv},
				Raw: &metav1.DeleteOptions{OrphanDependents: &orphan}}) //nolint:staticcheck // the deprecated field, as an old client sends it

		}},
		{"a delete on the current resourceVersion, as a release sends it: let through", deleteLockAsRead},
	},
	"reshaped lock": {
		{"create the lock", createLock},
		{"mark it with its own UID", lockJSONPatch(`[{"op":"add","path":"/metadata/annotations","value":{"initlock.dev/releasable":"$lockuid"}}]`)},
		{"take its label away once marked: refused, marked or not", lockJSONPatch(`[{"op":"remove","path":"/metadata/labels/cluster.x-k8s.io~1cluster-name"}]`)},
		{"a plain delete of the marked lock: refused", deleteLockPlain},
	},
	"lock held by another finalizer": {
		{"create the lock", createLock},
		{"another controller's finalizer", lockJSONPatch(`[{"op":"test","path":"/metadata/resourceVersion","value":"$rv"},{"op":"add","path":"/metadata/finalizers","value":["example.com/keep"]}]`)},
		{"delete it unmarked: refused, not marked for deletion", deleteLockPlain},
		{"mark it for release", lockJSONPatch(`[{"op":"add","path":"/metadata/annotations","value":{"initlock.dev/releasable":"$lockuid"}}]`)},
		{"delete it: marked for deletion, kept", deleteLockAsRead},
		{"delete it again", deleteLockPlain},
		{"create it again: the name is taken", createLock},
		{"rewrite its record while it is being deleted", func(ctx context.Context, b *backend) error { return b.patchLock(ctx, "while-deleting", "") }},
		{"a new finalizer is refused while it is being deleted", lockJSONPatch(`[{"op":"add","path":"/metadata/finalizers/-","value":"example.com/other"}]`)},
		{"remove the finalizer: gone", lockJSONPatch(`[{"op":"test","path":"/metadata/finalizers","value":["example.com/keep"]},{"op":"remove","path":"/metadata/finalizers"}]`)},
		{"create it again", createLock},
	},
}

// lockPatch patches the lock; $rv is the resourceVersion last read,
// $lockuid its UID.
func lockPatch(pt types.PatchType, body string) func(context.Context, *backend) error {
	return func(ctx context.Context, b *backend) error {
		cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: b.ns, Name: "c1-lock"}}
		body := strings.NewReplacer("$rv", b.rv["c1-lock"], "$lockuid", string(b.uid["c1-lock"])).Replace(body)
		if err := b.c.Patch(ctx, cm, client.RawPatch(pt, []byte(body))); err != nil {
			return err
		}
		b.rv["c1-lock"] = cm.ResourceVersion
		return nil
	}
}

func lockJSONPatch(body string) func(context.Context, *backend) error {
	return lockPatch(types.JSONPatchType, body)
}

func lockMergePatch(body string) func(context.Context, *backend) error {
	return lockPatch(types.MergePatchType, body)
}

// collector is the user the garbage collector deletes as: one the lock
// guard does not name (a kubeconfig user of kube-controller-manager's own).
const collector = "kube-controller-manager"

// TestConformance runs each script against the model and the API server
// and compares, step by step, the errors (status code and reason) and the
// objects as they are then (the fields the lock protocol reads or writes,
// and the generation).
func TestConformance(t *testing.T) {
	guard, err := apimodel.LockGuard()
	if err != nil {
		t.Fatal(err)
	}
	failedTests, refusals := 0, 0
	t.Cleanup(func() {
		if failedTests == 0 {
			t.Error("no step had the API server answer a failed JSON patch test")
		}
		if refusals == 0 {
			t.Error("no step had the API server's lock guard refuse a delete")
		}
	})
	cfg := rest.CopyConfig(env.Config)
	cfg.Impersonate = rest.ImpersonationConfig{UserName: collector, Groups: []string{"system:masters"}}
	gc, err := client.New(cfg, client.Options{Scheme: env.Client.Scheme()})
	if err != nil {
		t.Fatal(err)
	}
	for name, steps := range scripts {
		t.Run(name, func(t *testing.T) {
			ns := env.Namespace(t)
			real := &backend{c: env.Client, ns: ns, uid: map[string]types.UID{}, rv: map[string]string{},
				collect: func(ctx context.Context, b *backend) error {
					uid, rv := b.uid["c1-lock"], b.rv["c1-lock"]
					return gc.Delete(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: b.ns, Name: "c1-lock"}},
						client.Preconditions{UID: &uid, ResourceVersion: &rv}, client.PropagationPolicy(metav1.DeletePropagationBackground))
				}}
			store := apimodel.NewStore()
			store.SetGuard(guard)
			model := &backend{c: &apimodel.Client{Store: store}, ns: ns, uid: map[string]types.UID{}, rv: map[string]string{},
				collect: func(_ context.Context, b *backend) error {
					uid, rv := b.uid["c1-lock"], b.rv["c1-lock"]
					background := metav1.DeletePropagationBackground
					return store.DeleteWith(apimodel.Key{Kind: "ConfigMap", Namespace: b.ns, Name: "c1-lock"},
						apimodel.DeleteRequest{UID: &uid, ResourceVersion: &rv, Propagation: &background, User: collector})
				}}
			for _, s := range steps {
				realErr, modelErr := s.do(t.Context(), real), s.do(t.Context(), model)
				a, b := describe(realErr), describe(modelErr)
				t.Logf("%s: %s", s.name, a)
				if a != b {
					t.Errorf("%s: the API server answers %s, the model %s", s.name, a, b)
				}
				if strings.HasSuffix(a, "(a failed test)") {
					failedTests++
				}
				if a == "403 Forbidden" {
					refusals++
				}
				ra, rb := real.state(t), model.state(t)
				if !reflect.DeepEqual(ra, rb) {
					ja, _ := json.Marshal(ra)
					jb, _ := json.Marshal(rb)
					t.Errorf("%s: objects differ\nAPI server: %s\nmodel:      %s", s.name, ja, jb)
				}
			}
		})
	}
}

func describe(err error) string {
	if err == nil {
		return "success"
	}
	var st apierrors.APIStatus
	if errors.As(err, &st) {
		// pkg/initlock tells a failed test of a JSON patch by the API
		// server's generic message: both must answer it alike.
		if st.Status().Message == "the server rejected our request due to an error in our request" {
			return fmt.Sprintf("%d %s (a failed test)", st.Status().Code, st.Status().Reason)
		}
		return fmt.Sprintf("%d %s", st.Status().Code, st.Status().Reason)
	}
	return "error " + err.Error()
}

// clusterPatch patches the Cluster; $uid is its UID.
func clusterPatch(pt types.PatchType, body string) func(context.Context, *backend) error {
	return func(ctx context.Context, b *backend) error {
		u := &unstructured.Unstructured{}
		u.SetGroupVersionKind(capi.ClusterGVK(capi.V1Beta2))
		u.SetNamespace(b.ns)
		u.SetName("c1")
		body := strings.ReplaceAll(body, "$uid", string(b.uid["c1"]))
		return b.c.Patch(ctx, u, client.RawPatch(pt, []byte(body)))
	}
}

func jsonPatch(body string) func(context.Context, *backend) error {
	return clusterPatch(types.JSONPatchType, body)
}

func mergePatch(body string) func(context.Context, *backend) error {
	return clusterPatch(types.MergePatchType, body)
}

func (b *backend) create(ctx context.Context, u client.Object) error {
	if err := b.c.Create(ctx, u); err != nil {
		return err
	}
	b.uid[u.GetName()], b.rv[u.GetName()] = u.GetUID(), u.GetResourceVersion()
	return nil
}

func createLock(ctx context.Context, b *backend) error {
	cm := kubeenv.NewLock(b.ns, "c1", "m1", nil)
	if err := b.c.Create(ctx, cm); err != nil {
		return err
	}
	b.uid["c1-lock"], b.rv["c1-lock"] = cm.UID, cm.ResourceVersion
	return nil
}

// patchLock writes annotation note on the lock, as a merge patch carrying
// resourceVersion rv (initlock's optimistic lock).
func (b *backend) patchLock(ctx context.Context, note, rv string) error {
	cm := &corev1.ConfigMap{}
	cm.Namespace, cm.Name = b.ns, "c1-lock"
	body := fmt.Sprintf(`{"metadata":{"annotations":{"note":%q},"resourceVersion":%q}}`, note, rv)
	if rv == "" {
		body = fmt.Sprintf(`{"metadata":{"annotations":{"note":%q}}}`, note)
	}
	if err := b.c.Patch(ctx, cm, client.RawPatch(types.MergePatchType, []byte(body))); err != nil {
		return err
	}
	b.changed = cm.ResourceVersion != b.rv["c1-lock"]
	b.rv["c1-lock"] = cm.ResourceVersion
	return nil
}

// deleteLock deletes the lock with preconditions uid and rv (none when
// nil); deleteLockPlain with none, deleteLockStale with the UID read and a
// stale resourceVersion, deleteLockAsRead with both read, as a release does.
func (b *backend) deleteLock(ctx context.Context, uid *types.UID, rv *string) error {
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: b.ns, Name: "c1-lock"}}
	return b.c.Delete(ctx, cm, client.Preconditions{UID: uid, ResourceVersion: rv})
}

func deleteLockPlain(ctx context.Context, b *backend) error { return b.deleteLock(ctx, nil, nil) }

func deleteLockStale(ctx context.Context, b *backend) error {
	uid, rv := b.uid["c1-lock"], "1"
	return b.deleteLock(ctx, &uid, &rv)
}

func deleteLockAsRead(ctx context.Context, b *backend) error {
	uid, rv := b.uid["c1-lock"], b.rv["c1-lock"]
	return b.deleteLock(ctx, &uid, &rv)
}

// kubectlDelete deletes the lock as kubectl delete does: no precondition,
// propagation policy Background (--cascade's default).
func kubectlDelete(ctx context.Context, b *backend) error {
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: b.ns, Name: "c1-lock"}}
	return b.c.Delete(ctx, cm, client.PropagationPolicy(metav1.DeletePropagationBackground))
}

// state reads the Cluster and the lock as the protocol sees them, with
// whether the last patch of the lock changed its resourceVersion and what
// the last list answered.
func (b *backend) state(t *testing.T) map[string]any {
	t.Helper()
	out := map[string]any{}
	cl := &unstructured.Unstructured{}
	cl.SetGroupVersionKind(capi.ClusterGVK(capi.V1Beta2))
	switch err := b.c.Get(t.Context(), client.ObjectKey{Namespace: b.ns, Name: "c1"}, cl); {
	case apierrors.IsNotFound(err):
	case err != nil:
		t.Fatal(err)
	default:
		paused, _, _ := unstructured.NestedFieldNoCopy(cl.Object, "spec", "paused")
		status, _, _ := unstructured.NestedFieldNoCopy(cl.Object, "status", "initialization")
		out["cluster"] = map[string]any{"annotations": cl.GetAnnotations(), "paused": paused, "generation": cl.GetGeneration(),
			"initialization": status, "register": wire.GrantFrom(cl.GetAnnotations()).Raw()}
	}
	cm := &corev1.ConfigMap{}
	switch err := b.c.Get(t.Context(), client.ObjectKey{Namespace: b.ns, Name: "c1-lock"}, cm); {
	case apierrors.IsNotFound(err):
	case err != nil:
		t.Fatal(err)
	default:
		// UIDs differ between the backends: a value that is the lock's
		// own UID (the release mark's) is compared as such.
		for k, v := range cm.Annotations {
			if v == string(cm.UID) {
				cm.Annotations[k] = "<its own UID>"
			}
		}
		out["lock"] = map[string]any{"labels": cm.Labels, "annotations": cm.Annotations, "data": cm.Data,
			"owners": cm.OwnerReferences, "lastPatchChangedIt": b.changed,
			"finalizers": cm.Finalizers, "deleting": cm.DeletionTimestamp != nil}
	}
	if b.listed != nil {
		out["listed"] = b.listed
	}
	return out
}
