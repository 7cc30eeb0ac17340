package demo

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/initlock/initlock/internal/kubeenv"
	"github.com/initlock/initlock/internal/kubeenv/velerosim"
	"github.com/initlock/initlock/internal/kubeenv/wire"
	"github.com/initlock/initlock/pkg/initlock/capi"
	"github.com/initlock/initlock/pkg/initlock/keeper"
)

// errStop marks an error that ends a poll at once.
var errStop = errors.New("stop polling")

// poll calls f every 50 ms until it returns nil, an error wrapping errStop,
// or timeout passes; it then returns f's last error.
func poll(ctx context.Context, timeout time.Duration, f func(context.Context) error) error {
	wctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	for {
		err := f(wctx)
		switch {
		case err == nil:
			return nil
		case errors.Is(err, errStop):
			return err
		case ctx.Err() != nil:
			return ctx.Err()
		}
		select {
		case <-wctx.Done():
			if ctx.Err() != nil {
				return ctx.Err()
			}
			return fmt.Errorf("not within %s: %w", timeout, err)
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// sleep waits for d or until ctx is done.
func sleep(ctx context.Context, d time.Duration) error {
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-time.After(d):
		return nil
	}
}

// writeCounter counts the create, update, patch and delete requests to
// ConfigMaps made through a rest.Config it wrapped, with kubeenv's Counter.
type writeCounter struct {
	counter kubeenv.Counter
	mu      sync.Mutex
	// taken are the counts at the last take.
	taken map[kubeenv.Call]int
}

func (w *writeCounter) wrap(cfg *rest.Config) *rest.Config { return w.counter.CountingConfig(cfg) }

// writeNames name the counts: successful writes by verb, then the writes
// refused for a conflict (optimistic concurrency at work) and the others
// that failed.
var writeNames = []struct{ key, name string }{
	{"create", "create"}, {"update", "update"}, {"patch", "patch"}, {"delete", "delete"},
	{"conflict", "refused for a conflict"}, {"failed", "failed"},
}

// writeKey names the count a ConfigMap write falls in, "" while it waits
// for its answer.
func writeKey(c kubeenv.Call) string {
	switch {
	case c.Status == 0:
		return ""
	case c.Status == http.StatusConflict:
		return "conflict"
	case c.Status == kubeenv.NoAnswer || c.Status >= 300:
		return "failed"
	}
	return c.Verb
}

// take returns the successful writes counted since the last take and a
// description such as "1 patch, 1 refused for a conflict".
func (w *writeCounter) take() (int, string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	now := w.counter.Calls()
	counts := map[string]int{}
	for c, n := range now {
		if c.Group == "" && c.Resource == "configmaps" && slices.Contains(kubeenv.WriteVerbs, c.Verb) {
			counts[writeKey(c)] += n - w.taken[c]
		}
	}
	w.taken = now
	total := 0
	var parts []string
	for _, wn := range writeNames {
		if n := counts[wn.key]; n > 0 {
			if wn.key != "conflict" && wn.key != "failed" {
				total += n
			}
			parts = append(parts, fmt.Sprintf("%d %s", n, wn.name))
		}
	}
	if len(parts) == 0 {
		return 0, "no write"
	}
	return total, strings.Join(parts, ", ")
}

func (d *demo) createNamespace(name string) error {
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}
	if err := d.c.Create(d.ctx, ns); err != nil {
		return fmt.Errorf("creating namespace %s: %w", name, err)
	}
	return nil
}

// create creates u and returns it.
func (d *demo) create(u *unstructured.Unstructured) (*unstructured.Unstructured, error) {
	if err := d.c.Create(d.ctx, u); err != nil {
		return nil, fmt.Errorf("creating %s %s/%s: %w", u.GetKind(), u.GetNamespace(), u.GetName(), err)
	}
	return u, nil
}

func (d *demo) getCluster(ns, name string) (*unstructured.Unstructured, error) {
	u := &unstructured.Unstructured{}
	u.SetGroupVersionKind(capi.ClusterGVK(d.capiVersion))
	if err := d.c.Get(d.ctx, types.NamespacedName{Namespace: ns, Name: name}, u); err != nil {
		if apierrors.IsNotFound(err) {
			return nil, nil
		}
		return nil, fmt.Errorf("reading cluster %s/%s: %w", ns, name, err)
	}
	return u, nil
}

// setPaused sets the Cluster's spec.paused with a merge patch.
func (d *demo) setPaused(cluster *unstructured.Unstructured, paused bool) error {
	patch := fmt.Appendf(nil, `{"spec":{"paused":%t}}`, paused)
	if err := d.c.Patch(d.ctx, cluster, client.RawPatch(types.MergePatchType, patch)); err != nil {
		return fmt.Errorf("setting spec.paused=%t on cluster %s/%s: %w", paused, cluster.GetNamespace(), cluster.GetName(), err)
	}
	return nil
}

// observe reads the lock, the Cluster and the Machines they name live, with
// keeper.Inspect, and decides as the manager does.
func (d *demo) observe(ns, cluster string) (*corev1.ConfigMap, keeper.Status, error) {
	s, err := keeper.Inspect(d.ctx, d.c, keeper.Query{Namespace: ns, Cluster: cluster, CAPIVersion: d.capiVersion,
		Policy: keeper.Policy{ReleaseAfterInit: true, OrphanGrace: d.opts.OrphanGrace}, Now: time.Now()})
	if err != nil {
		return nil, keeper.Status{}, err
	}
	return s.ConfigMap, s, nil
}

// describeLock says who holds a lock and who owns it.
func describeLock(cm *corev1.ConfigMap) string {
	if cm == nil {
		return "no lock"
	}
	holder := "(unreadable record)"
	if rec, err := wire.DecodeRecord(cm.Data[wire.DataKey]); err == nil {
		holder = rec.MachineName
	}
	return fmt.Sprintf("%s/%s: holder %s, %s", cm.Namespace, cm.Name, holder, owners(cm.OwnerReferences))
}

func owners(refs []metav1.OwnerReference) string {
	if len(refs) == 0 {
		return "no ownerReferences"
	}
	var out []string
	for _, r := range refs {
		out = append(out, fmt.Sprintf("%s %s uid %s", r.Kind, r.Name, short(r.UID)))
	}
	return "owned by " + strings.Join(out, ", ")
}

// short abbreviates a UID to its first block.
func short(uid types.UID) string {
	s, _, _ := strings.Cut(string(uid), "-")
	return s
}

// backedUpKinds are the kinds a backup reads, in the order a Velero restore
// brings them back: ConfigMaps early, Clusters last.
var backedUpKinds = []schema.GroupVersionKind{
	corev1.SchemeGroupVersion.WithKind("ConfigMap"),
	capi.MachineGVK(capi.V1Beta2),
	capi.ClusterGVK(capi.V1Beta2),
}

// restore creates the backed-up objects of the given kind as a Velero
// restore does, with the project's simulator of it (velerosim): metadata
// reset, no ownerReferences or status, the restore labels added.
func (d *demo) restore(objs []*unstructured.Unstructured, kind string) ([]*unstructured.Unstructured, error) {
	var sel []*unstructured.Unstructured
	for _, o := range objs {
		if o.GetKind() == kind {
			sel = append(sel, o)
		}
	}
	r, err := velerosim.New(d.env.Config, velerosim.Options{BackupName: "demo-backup", RestoreName: "demo-restore"})
	if err != nil {
		return nil, err
	}
	return r.Restore(d.ctx, sel)
}

// countKinds says how many objects of each kind objs holds.
func countKinds(objs []*unstructured.Unstructured) string {
	counts := map[string]int{}
	for _, o := range objs {
		counts[o.GetKind()]++
	}
	var parts []string
	for _, k := range backedUpKinds {
		parts = append(parts, fmt.Sprintf("%d %s", counts[k.Kind], k.Kind))
	}
	return strings.Join(parts, ", ")
}

// deleteNamespace deletes a namespace and waits until it is gone.
func (d *demo) deleteNamespace(name string) error {
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}
	if err := d.c.Delete(d.ctx, ns); err != nil {
		return fmt.Errorf("deleting namespace %s: %w", name, err)
	}
	return poll(d.ctx, d.opts.Timeout, func(ctx context.Context) error {
		err := d.c.Get(ctx, client.ObjectKeyFromObject(ns), ns)
		if apierrors.IsNotFound(err) {
			return nil
		}
		if err != nil {
			return err
		}
		return fmt.Errorf("namespace %s is still %s", name, ns.Status.Phase)
	})
}

// waitLock polls the lock of cluster in ns until check, given the lock (nil
// when there is none), returns nil, and returns the lock it last read.
func (d *demo) waitLock(ns, cluster string, check func(*corev1.ConfigMap) error) (*corev1.ConfigMap, error) {
	var cm *corev1.ConfigMap
	err := poll(d.ctx, d.opts.Timeout, func(context.Context) error {
		var err error
		if cm, err = kubeenv.GetLock(d.ctx, d.c, ns, cluster); err != nil {
			return err
		}
		return check(cm)
	})
	return cm, err
}

// waitLockGone waits until the cluster's lock no longer exists.
func (d *demo) waitLockGone(ns, cluster string) error {
	_, err := d.waitLock(ns, cluster, func(cm *corev1.ConfigMap) error {
		if cm != nil {
			return fmt.Errorf("lock %s/%s still exists: %s", ns, cm.Name, describeLock(cm))
		}
		return nil
	})
	return err
}

// event waits for an events.k8s.io Event with the reason regarding the
// named object.
func (d *demo) event(ns, reason, kind, name string) (*eventsv1.Event, error) {
	var found *eventsv1.Event
	err := poll(d.ctx, d.opts.Timeout, func(ctx context.Context) error {
		var list eventsv1.EventList
		if err := d.c.List(ctx, &list, client.InNamespace(ns)); err != nil {
			return err
		}
		sort.Slice(list.Items, func(i, j int) bool {
			return list.Items[i].CreationTimestamp.Before(&list.Items[j].CreationTimestamp)
		})
		for i := range list.Items {
			e := &list.Items[i]
			if e.Reason == reason && e.Regarding.Kind == kind && e.Regarding.Name == name {
				found = e
				return nil
			}
		}
		return fmt.Errorf("no %s event on %s %s/%s", reason, kind, ns, name)
	})
	return found, err
}
