package chaos

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"

	velerov1 "github.com/vmware-tanzu/velero/pkg/apis/velero/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/tools/cache"
	watchtools "k8s.io/client-go/tools/watch"

	"github.com/initlock/initlock/internal/kubeenv/wire"
	"github.com/initlock/initlock/pkg/initlock/capi"
)

// Watcher watches the ConfigMaps, Machines and Clusters of a namespace
// from a revision on, records every lock write, every Machine created or
// deleted and every change of a Cluster (its grant register included) in
// the History, and feeds the Checker.
type Watcher struct {
	h       *History
	checker *Checker
	cancel  context.CancelFunc
	wg      sync.WaitGroup

	mu   sync.Mutex
	err  error
	seen map[string]bool // barrier names seen
	cond *sync.Cond
}

// GVRs of the watched kinds.
var (
	configMapsGVR = corev1.SchemeGroupVersion.WithResource("configmaps")
	machinesGVR   = schema.GroupVersionResource{Group: capi.Group, Version: capi.V1Beta2, Resource: "machines"}
	clustersGVR   = schema.GroupVersionResource{Group: capi.Group, Version: capi.V1Beta2, Resource: "clusters"}
	watchedGVRs   = [numKinds]schema.GroupVersionResource{configMapsGVR, machinesGVR, clustersGVR}
)

// StartWatcher lists each kind in namespace, which must be new and empty,
// to learn a revision, then watches from there.
func StartWatcher(ctx context.Context, dc dynamic.Interface, namespace string, h *History, c *Checker) (*Watcher, error) {
	ctx, cancel := context.WithCancel(ctx)
	w := &Watcher{h: h, checker: c, cancel: cancel, seen: map[string]bool{}}
	w.cond = sync.NewCond(&w.mu)
	for kind, gvr := range watchedGVRs {
		ri := dc.Resource(gvr).Namespace(namespace)
		// The namespace is new: any revision the watch cache has is from
		// before its first object, and watching from it misses nothing. A
		// consistent list would wait for the cache to catch up with etcd.
		list, err := ri.List(ctx, metav1.ListOptions{ResourceVersion: "0"})
		if err != nil {
			cancel()
			return nil, fmt.Errorf("listing %s in %s: %w", gvr.Resource, namespace, err)
		}
		rv := list.GetResourceVersion()
		n, err := strconv.ParseInt(rv, 10, 64)
		if err != nil {
			cancel()
			return nil, fmt.Errorf("%s list revision %q is not a number: %w", gvr.Resource, rv, err)
		}
		c.StartRevision(kind, n)
		rw, err := watchtools.NewRetryWatcherWithContext(ctx, rv, &cache.ListWatch{
			WatchFuncWithContext: func(ctx context.Context, o metav1.ListOptions) (watch.Interface, error) {
				return ri.Watch(ctx, o)
			},
		})
		if err != nil {
			cancel()
			return nil, err
		}
		w.wg.Add(1)
		go func() {
			defer w.wg.Done()
			defer rw.Stop()
			w.consume(ctx, kind, rw)
		}()
	}
	return w, nil
}

// Stop ends the watches and returns the first error they met.
func (w *Watcher) Stop() error {
	w.cancel()
	w.wg.Wait()
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.err
}

func (w *Watcher) fail(err error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.err == nil {
		w.err = err
	}
	w.cond.Broadcast()
}

func (w *Watcher) consume(ctx context.Context, kind int, rw *watchtools.RetryWatcher) {
	for {
		var ev watch.Event
		ok := false
		select {
		case <-ctx.Done():
			return
		case <-rw.Done():
		case ev, ok = <-rw.ResultChan():
		}
		if !ok {
			if ctx.Err() == nil {
				w.fail(fmt.Errorf("the %s watch ended", kindNames[kind]))
			}
			return
		}
		if err := w.take(kind, ev); err != nil {
			w.fail(err)
			return
		}
	}
}

// take hands one event of the watch of kind to the Checker.
func (w *Watcher) take(kind int, ev watch.Event) error {
	switch ev.Type {
	case watch.Bookmark:
		return nil
	case watch.Error:
		return fmt.Errorf("the %s watch failed: %w", kindNames[kind], apiStatus(ev.Object))
	}
	u, ok := ev.Object.(*unstructured.Unstructured)
	if !ok {
		return fmt.Errorf("the %s watch sent a %T", kindNames[kind], ev.Object)
	}
	o, err := w.observe(kind, ev.Type, u)
	if err != nil {
		return err
	}
	w.checker.Observe(o)
	w.mu.Lock()
	defer w.mu.Unlock()
	w.seen[kindNames[kind]+"/"+o.Name] = true
	w.cond.Broadcast()
	return nil
}

// WaitSeen waits until the watch of kind has delivered an event for name,
// or the context ends, or a watch fails.
func (w *Watcher) WaitSeen(ctx context.Context, kind int, name string) error {
	stop := context.AfterFunc(ctx, func() {
		w.mu.Lock()
		w.cond.Broadcast()
		w.mu.Unlock()
	})
	defer stop()
	w.mu.Lock()
	defer w.mu.Unlock()
	for !w.seen[kindNames[kind]+"/"+name] {
		if w.err != nil {
			return w.err
		}
		if ctx.Err() != nil {
			return fmt.Errorf("waiting for the %s watch to deliver %s: %w", kindNames[kind], name, ctx.Err())
		}
		w.cond.Wait()
	}
	return nil
}

// observe reduces an event and records it in the history.
func (w *Watcher) observe(kind int, typ watch.EventType, u *unstructured.Unstructured) (Observed, error) {
	rv, err := strconv.ParseInt(u.GetResourceVersion(), 10, 64)
	if err != nil {
		return Observed{}, fmt.Errorf("%s %s: resourceVersion %q is not a number: %w", kindNames[kind], u.GetName(), u.GetResourceVersion(), err)
	}
	o := Observed{Kind: kind, Type: typ, Name: u.GetName(), UID: u.GetUID(), RV: rv, Seen: w.h.Since()}
	ev := strings.ToLower(string(typ))
	switch kind {
	case KindConfigMap:
		cm := &corev1.ConfigMap{}
		if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, cm); err != nil {
			return o, fmt.Errorf("configmap %s: %w", u.GetName(), err)
		}
		cluster := cm.Labels[wire.ClusterNameLabel]
		if cluster != "" && cm.Name == cluster+addOnSuffix {
			o.AddOnOf = cluster
			var owners []string
			for _, ref := range cm.OwnerReferences {
				if ref.Kind == "Cluster" {
					o.OwnerUIDs = append(o.OwnerUIDs, ref.UID)
					owners = append(owners, shortUID(string(ref.UID)))
				}
			}
			w.h.Add("watch", "add-on "+ev, o.Name, u.GetResourceVersion(),
				"owners="+strings.Join(owners, ",")+" uid="+shortUID(string(o.UID))+" restore="+cm.Labels[velerov1.RestoreNameLabel])
			break
		}
		if cluster == "" || cm.Name != cluster+wire.LockSuffix {
			w.h.Add("watch", "configmap "+ev, o.Name, u.GetResourceVersion(), "")
			break
		}
		lk := wire.LockOf(cm, cluster)
		if lk.Err != nil {
			w.h.Add("watch", "configmap "+ev, o.Name, u.GetResourceVersion(), "not a lock")
			break
		}
		o.LockOf, o.Holder = cluster, lk.Record.MachineName
		o.Marked = cm.Annotations[wire.ReleaseAnnotation] == string(cm.UID)
		for _, ref := range cm.OwnerReferences {
			if ref.Kind == "Cluster" {
				o.Owners = append(o.Owners, ref.Name+"/"+shortUID(string(ref.UID)))
			}
		}
		detail := "holder=" + o.Holder + " owners=" + strings.Join(o.Owners, ",") + " uid=" + shortUID(string(o.UID))
		if _, ok := cm.Annotations[wire.ClusterAbsentAnnotation]; ok {
			detail += " absent-mark"
		}
		if o.Marked {
			detail += " release-mark"
		}
		w.h.Add("watch", "lock "+ev, o.Name, u.GetResourceVersion(), detail)
	case KindMachine:
		if typ != watch.Modified {
			w.h.Add("watch", "machine "+ev, o.Name, u.GetResourceVersion(), "uid="+shortUID(string(o.UID)))
		}
	case KindCluster:
		o.Initialized = capi.IsControlPlaneInitialized(u)
		o.Paused = capi.IsPaused(u)
		o.Deleting = u.GetDeletionTimestamp() != nil
		o.Grant = u.GetAnnotations()[wire.GrantAnnotation]
		w.h.Add("watch", "cluster "+ev, o.Name, u.GetResourceVersion(),
			fmt.Sprintf("initialised=%t paused=%t deleting=%t %s uid=%s", o.Initialized, o.Paused, o.Deleting, grantDetail(o.Grant), shortUID(string(o.UID))))
	}
	return o, nil
}

func grantDetail(g string) string {
	if g == "" {
		return "no grant"
	}
	return "grant=" + g
}

func shortUID(uid string) string {
	if len(uid) > 8 {
		return uid[:8]
	}
	return uid
}

func apiStatus(obj runtime.Object) error {
	if s, ok := obj.(*metav1.Status); ok {
		return errors.New(s.Message)
	}
	return fmt.Errorf("%v", obj)
}

func itoa64(n int64) string { return strconv.FormatInt(n, 10) }
