package relink

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/go-logr/logr"
	"github.com/prometheus/client_golang/prometheus"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	ctrlmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	"sigs.k8s.io/controller-runtime/pkg/recorder"
	"sigs.k8s.io/controller-runtime/pkg/source"

	"github.com/initlock/initlock/pkg/initlock/capi"
)

// Event reasons.
const (
	// ReasonOwnerNotFound is the reason of the Warning event recorded on an
	// object whose recorded owner has not come back after Options.WarnAfter.
	ReasonOwnerNotFound = "OwnerNotFound"
	// ReasonInvalidAnnotation is the reason of the Warning event recorded on
	// an object whose Annotation cannot be read.
	ReasonInvalidAnnotation = "InvalidRestoredOwnerReferences"
	// ReasonRelinkForbidden is the reason of the Warning event recorded on
	// an object whose relink patch the API server refused for lack of
	// permission; the note names the permission.
	ReasonRelinkForbidden = "RelinkForbidden"
)

// ControllerName names the relinker's controller.
const ControllerName = "relink"

// Options configure a Relinker. The zero value is usable.
type Options struct {
	// Kinds the relinker relinks and watches as owners. A kind without a
	// version uses the version the API server prefers. Nil means
	// DefaultKinds. The Cluster API Cluster kind is always watched.
	Kinds []schema.GroupVersionKind
	// Selectors restrict the objects of a kind that the relinker caches,
	// and so relinks and finds as owners. Nil means DefaultSelectors.
	Selectors map[schema.GroupKind]labels.Selector
	// Namespace restricts the relinker to one namespace; "" watches all.
	Namespace string
	// MaxConcurrentReconciles defaults to 4.
	MaxConcurrentReconciles int
	// WarnAfter is how long after its creation (by the restore) an object
	// may wait for an owner before a Warning event is recorded on it.
	// Defaults to 5 minutes; a negative value means at once.
	WarnAfter time.Duration
	// MinBackoff and MaxBackoff bound the delay before an object waiting
	// for an owner is looked at again; an owner appearing in a watched kind
	// triggers it at once. Defaults 1 s and 5 min.
	MinBackoff, MaxBackoff time.Duration
	// Registry receives the relinker's metrics; nil means
	// controller-runtime's registry, which the manager serves.
	Registry prometheus.Registerer
	// Clock defaults to the real clock.
	Clock clock.PassiveClock
	// WatchFilter, when set, limits the relinker to the objects of Clusters
	// labelled capi.WatchFilterLabel with this value (see filtered).
	WatchFilter string
}

func (o Options) withDefaults() Options {
	if o.MaxConcurrentReconciles <= 0 {
		o.MaxConcurrentReconciles = 4
	}
	if o.WarnAfter == 0 {
		o.WarnAfter = 5 * time.Minute
	}
	if o.MinBackoff <= 0 {
		o.MinBackoff = time.Second
	}
	if o.MaxBackoff <= 0 {
		o.MaxBackoff = 5 * time.Minute
	}
	if o.MaxBackoff < o.MinBackoff {
		o.MaxBackoff = o.MinBackoff
	}
	if o.Registry == nil {
		o.Registry = ctrlmetrics.Registry
	}
	if o.Clock == nil {
		o.Clock = clock.RealClock{}
	}
	if o.Selectors == nil {
		o.Selectors = DefaultSelectors()
	}
	return o
}

// Request names an object of one of the relinked kinds.
type Request struct {
	GVK schema.GroupVersionKind
	types.NamespacedName
}

// String returns Kind.group namespace/name.
func (r Request) String() string { return r.GVK.GroupKind().String() + " " + r.NamespacedName.String() }

// Relinker rebuilds the ownerReferences recorded in Annotation.
type Relinker struct {
	opts   Options
	kinds  []*kind
	byGK   map[schema.GroupKind]*kind
	cache  cache.Cache
	client client.Client
	// reader reads owners of kinds the relinker does not watch.
	reader   client.Reader
	mapper   meta.RESTMapper
	recorder recorder.EventRecorder
	metrics  *metrics

	mu sync.Mutex
	// waiting holds the objects waiting for an owner.
	waiting map[Request]*waitState
	// written holds, for each object patched, the resourceVersion it was
	// patched from, until the cache has seen the patch: a reconcile that
	// still reads that version leaves the object to the coming update
	// event instead of writing again.
	written map[Request]string
}

type waitState struct {
	attempts int
	warned   bool
}

// New returns a Relinker; SetupWithManager starts it with a manager.
func New(opts Options) *Relinker {
	return &Relinker{
		opts:    opts.withDefaults(),
		waiting: map[Request]*waitState{},
		written: map[Request]string{},
	}
}

// SetupWithManager resolves the kinds against the API server, adds the
// relinker's metadata cache to mgr and starts the relink controller with it.
// The cache holds the metadata of the relinked kinds only (and spec.paused
// of Clusters), restricted by Options.Selectors, without managedFields.
func (r *Relinker) SetupWithManager(ctx context.Context, mgr ctrl.Manager) error {
	kinds := r.opts.Kinds
	defaults := kinds == nil
	if defaults {
		kinds = DefaultKinds()
	}
	resolved, skipped, err := resolveKinds(mgr.GetRESTMapper(), kinds, defaults, r.opts.Selectors)
	if err != nil {
		return fmt.Errorf("setting up the relinker: %w", err)
	}
	log := mgr.GetLogger().WithName(ControllerName)
	if len(skipped) > 0 {
		log.Info("Kinds not served by the API server are not relinked", "kinds", skipped)
	}
	r.byGK = map[schema.GroupKind]*kind{}
	for i := range resolved {
		k := &resolved[i]
		r.kinds = append(r.kinds, k)
		r.byGK[k.gvk.GroupKind()] = k
	}
	r.client, r.reader, r.mapper = mgr.GetClient(), mgr.GetAPIReader(), newMemoMapper(mgr.GetRESTMapper())
	r.recorder = mgr.GetEventRecorder("initlock-relinker")
	if r.metrics, err = newMetrics(r.opts.Registry, r.kinds); err != nil {
		return fmt.Errorf("setting up the relinker: %w", err)
	}
	if r.cache, err = r.newCache(mgr); err != nil {
		return fmt.Errorf("setting up the relinker's cache: %w", err)
	}
	for _, k := range r.kinds {
		if err := r.cache.IndexField(ctx, k.newObject(), indexField, indexValues); err != nil {
			return fmt.Errorf("indexing %s by recorded owner: %w", k.gvk.GroupKind(), err)
		}
	}
	if err := mgr.Add(cacheRunnable{r.cache}); err != nil {
		return err
	}
	c, err := controller.NewTyped(ControllerName, mgr, controller.TypedOptions[Request]{
		Reconciler:              r,
		MaxConcurrentReconciles: r.opts.MaxConcurrentReconciles,
		LogConstructor: func(req *Request) logr.Logger {
			l := log
			if req != nil {
				l = l.WithValues("kind", req.GVK.GroupKind().String(), "object", klog.KRef(req.Namespace, req.Name))
			}
			return l
		},
	})
	if err != nil {
		return err
	}
	for _, k := range r.kinds {
		if err := c.Watch(source.TypedKind(r.cache, k.newObject(), r.handlerFor(k))); err != nil {
			return fmt.Errorf("watching %s: %w", k.gvk.GroupKind(), err)
		}
	}
	return nil
}

// cacheRunnable lets the manager start the relinker's cache with its own
// caches, before the controllers.
type cacheRunnable struct{ cache.Cache }

func (c cacheRunnable) GetCache() cache.Cache { return c.Cache }

func (r *Relinker) newCache(mgr ctrl.Manager) (cache.Cache, error) {
	byObject := map[client.Object]cache.ByObject{}
	for _, k := range r.kinds {
		// The relinker only reads what it gets from its cache (patches are
		// built apart), so reads need no copy.
		bo := cache.ByObject{Label: k.selector, UnsafeDisableDeepCopy: ptr.To(true)}
		if k.cluster {
			bo.Transform = trimCluster
		}
		byObject[k.newObject()] = bo
	}
	opts := cache.Options{
		HTTPClient:                  mgr.GetHTTPClient(),
		Scheme:                      mgr.GetScheme(),
		Mapper:                      r.mapper,
		ByObject:                    byObject,
		DefaultTransform:            cache.TransformStripManagedFields(),
		ReaderFailOnMissingInformer: true,
	}
	if r.opts.Namespace != "" {
		opts.DefaultNamespaces = map[string]cache.Config{r.opts.Namespace: {}}
	}
	return cache.New(mgr.GetConfig(), opts)
}

// trimCluster keeps of a Cluster only its metadata, without managedFields,
// and spec.paused: all the relinker reads.
func trimCluster(in any) (any, error) {
	u, ok := in.(*unstructured.Unstructured)
	if !ok {
		return in, nil
	}
	out := map[string]any{"apiVersion": u.GetAPIVersion(), "kind": u.GetKind()}
	if m, ok := u.Object["metadata"].(map[string]any); ok {
		delete(m, "managedFields")
		out["metadata"] = m
	}
	if paused, found, _ := unstructured.NestedBool(u.Object, "spec", "paused"); found {
		out["spec"] = map[string]any{"paused": paused}
	}
	u.Object = out
	return u, nil
}

func (k *kind) newObject() client.Object {
	if k.cluster {
		u := &unstructured.Unstructured{}
		u.SetGroupVersionKind(k.gvk)
		return u
	}
	m := &metav1.PartialObjectMetadata{}
	m.SetGroupVersionKind(k.gvk)
	return m
}

func (k *kind) newList() client.ObjectList {
	gvk := k.gvk.GroupVersion().WithKind(k.gvk.Kind + "List")
	if k.cluster {
		u := &unstructured.UnstructuredList{}
		u.SetGroupVersionKind(gvk)
		return u
	}
	m := &metav1.PartialObjectMetadataList{}
	m.SetGroupVersionKind(gvk)
	return m
}

// Reconcile links one object to the owners its Annotation records.
func (r *Relinker) Reconcile(ctx context.Context, req Request) (ctrl.Result, error) {
	log := ctrl.LoggerFrom(ctx)
	k, ok := r.byGK[req.GVK.GroupKind()]
	if !ok {
		return ctrl.Result{}, reconcile.TerminalError(fmt.Errorf("%s: kind is not relinked", req))
	}
	obj := k.newObject()
	if err := r.cache.Get(ctx, req.NamespacedName, obj); err != nil {
		if apierrors.IsNotFound(err) {
			r.forget(req, true)
			return ctrl.Result{}, nil
		}
		return ctrl.Result{}, err
	}
	if r.stale(req, obj.GetResourceVersion()) {
		return ctrl.Result{}, nil
	}
	value, ok := obj.GetAnnotations()[Annotation]
	if !ok {
		r.forget(req, false)
		return ctrl.Result{}, nil
	}
	owners, err := Decode(value)
	if err != nil {
		r.forget(req, false)
		r.recorder.Eventf(obj, nil, corev1.EventTypeWarning, ReasonInvalidAnnotation, "Relink",
			"Cannot read the %s annotation, the object is not relinked: %v", Annotation, err)
		return ctrl.Result{}, reconcile.TerminalError(fmt.Errorf("%s: %w; correct the annotation or remove it", req, err))
	}
	if cluster, paused, err := r.paused(ctx, k, obj, owners); err != nil || paused {
		if paused {
			log.V(4).Info("Cluster is paused, not relinking", "cluster", klog.KRef(obj.GetNamespace(), cluster))
			r.forget(req, false)
		}
		return ctrl.Result{}, err
	}
	if filtered, retry, err := r.filtered(ctx, k, obj, owners); err != nil {
		return ctrl.Result{}, err
	} else if filtered {
		r.forget(req, false)
		if retry {
			return ctrl.Result{RequeueAfter: r.opts.MaxBackoff}, nil
		}
		return ctrl.Result{}, nil
	}
	found, missing, err := r.resolve(ctx, k, obj, owners)
	if err != nil {
		return ctrl.Result{}, err
	}
	refs, changed, demoted := link(obj.GetOwnerReferences(), found)
	for _, d := range demoted {
		log.Info("Owner recorded as controller linked without controller: the object already has a controller", "owner", d.String())
	}
	all := len(missing) == 0
	if changed || all {
		if err := r.patch(ctx, k, req, obj, refs, changed, all); err != nil {
			if apierrors.IsForbidden(err) && !isNamespaceTerminating(err) {
				return r.refused(ctx, k, obj, refs, err), nil
			}
			return ctrl.Result{}, fmt.Errorf("%s: relinking to its owners: %w", req, err)
		}
	}
	if all {
		r.forget(req, false)
		r.metrics.linked.WithLabelValues(k.gvk.Group, k.gvk.Kind).Inc()
		log.V(2).Info("Relinked to the recorded owners", "owners", len(owners))
		return ctrl.Result{}, nil
	}
	return r.wait(ctx, k, req, obj, missing), nil
}

// stale tells whether the cache still holds the version of the object that
// the relinker patched.
func (r *Relinker) stale(req Request, rv string) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	from, ok := r.written[req]
	if !ok {
		return false
	}
	if from == rv {
		return true
	}
	delete(r.written, req)
	return false
}

// forget drops the bookkeeping of an object that no longer waits: linked,
// without the annotation, paused or deleted. gone also drops the record of
// the relinker's last patch, once the cache has moved past it.
func (r *Relinker) forget(req Request, gone bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if gone {
		delete(r.written, req)
	}
	if _, ok := r.waiting[req]; ok {
		delete(r.waiting, req)
		r.metrics.waiting.WithLabelValues(req.GVK.Group, req.GVK.Kind).Dec()
	}
}

func (r *Relinker) wait(ctx context.Context, k *kind, req Request, obj client.Object, missing []OwnerRef) ctrl.Result {
	r.mu.Lock()
	s, ok := r.waiting[req]
	if !ok {
		s = &waitState{}
		r.waiting[req] = s
		r.metrics.waiting.WithLabelValues(k.gvk.Group, k.gvk.Kind).Inc()
	}
	s.attempts++
	backoff := r.opts.MaxBackoff
	if s.attempts < 32 {
		backoff = min(r.opts.MinBackoff<<(s.attempts-1), r.opts.MaxBackoff)
	}
	waited := r.opts.Clock.Since(obj.GetCreationTimestamp().Time)
	warn := !s.warned && waited >= r.opts.WarnAfter
	if warn {
		s.warned = true
	}
	r.mu.Unlock()

	names := make([]string, len(missing))
	for i, o := range missing {
		names[i] = o.String()
	}
	ctrl.LoggerFrom(ctx).V(1).Info("Waiting for owners to be restored", "missing", names, "retryAfter", backoff)
	if warn {
		r.recorder.Eventf(obj, nil, corev1.EventTypeWarning, ReasonOwnerNotFound, "Relink",
			"Owner %s not found %s after restore; the object stays unlinked and nothing is deleted until it is restored",
			strings.Join(names, ", "), waited.Truncate(time.Second))
	} else if left := r.opts.WarnAfter - waited; !s.warned && left > 0 && left < backoff {
		backoff = left
	}
	return ctrl.Result{RequeueAfter: backoff}
}

// paused tells whether the object belongs to a paused Cluster: the Cluster
// named by its cluster-name label, the Cluster itself, or a Cluster it
// records as owner.
func (r *Relinker) paused(ctx context.Context, k *kind, obj client.Object, owners []OwnerRef) (string, bool, error) {
	if k.cluster && capi.IsPaused(obj.(*unstructured.Unstructured)) {
		return obj.GetName(), true, nil
	}
	if obj.GetNamespace() == "" {
		return "", false, nil
	}
	var names []string
	if c := obj.GetLabels()[capi.ClusterNameLabel]; c != "" {
		names = append(names, c)
	}
	clusterGK := schema.GroupKind{Group: capi.Group, Kind: capi.ClusterKind}
	for _, o := range owners {
		if o.GroupKind() == clusterGK && !slices.Contains(names, o.Name) {
			names = append(names, o.Name)
		}
	}
	ck := r.byGK[clusterGK]
	for _, name := range names {
		cl := ck.newObject()
		err := r.cache.Get(ctx, types.NamespacedName{Namespace: obj.GetNamespace(), Name: name}, cl)
		if apierrors.IsNotFound(err) {
			continue
		}
		if err != nil {
			return "", false, err
		}
		if capi.IsPaused(cl.(*unstructured.Unstructured)) {
			return name, true, nil
		}
	}
	return "", false, nil
}

// foundOwner is a recorded owner that exists, with its current UID.
type foundOwner struct {
	ref        OwnerRef
	apiVersion string
	uid        types.UID
}

// resolve looks every recorded owner up: in the cache for the watched
// kinds, live for the others. An owner that is being deleted counts as
// missing: linking to it would have the garbage collector delete the
// object.
func (r *Relinker) resolve(ctx context.Context, k *kind, obj client.Object, owners []OwnerRef) (found []foundOwner, missing []OwnerRef, _ error) {
	for _, o := range owners {
		gk := o.GroupKind()
		ok, found1, err := r.lookup(ctx, obj, o, gk)
		if err != nil {
			return nil, nil, fmt.Errorf("%s %s: looking up owner %s: %w", k.gvk.GroupKind(), klog.KObj(obj), o, err)
		}
		if !ok {
			missing = append(missing, o)
			continue
		}
		found = append(found, found1)
	}
	return found, missing, nil
}

func (r *Relinker) lookup(ctx context.Context, obj client.Object, o OwnerRef, gk schema.GroupKind) (bool, foundOwner, error) {
	var (
		owner      client.Object
		namespaced bool
		served     schema.GroupVersionKind
		read       client.Reader
	)
	if w, ok := r.byGK[gk]; ok {
		owner, namespaced, served, read = w.newObject(), w.namespaced, w.gvk, r.cache
	} else {
		m, err := r.mapper.RESTMapping(gk)
		if meta.IsNoMatchError(err) {
			return false, foundOwner{}, nil
		}
		if err != nil {
			return false, foundOwner{}, err
		}
		pom := &metav1.PartialObjectMetadata{}
		pom.SetGroupVersionKind(m.GroupVersionKind)
		owner, namespaced, served, read = pom, m.Scope.Name() == meta.RESTScopeNameNamespace, m.GroupVersionKind, r.reader
	}
	key := types.NamespacedName{Name: o.Name}
	if namespaced {
		if obj.GetNamespace() == "" {
			// A cluster-scoped object cannot be owned by a namespaced one.
			return false, foundOwner{}, nil
		}
		key.Namespace = obj.GetNamespace()
	}
	err := read.Get(ctx, key, owner)
	if apierrors.IsNotFound(err) {
		return false, foundOwner{}, nil
	}
	if apierrors.IsForbidden(err) {
		return false, foundOwner{}, fmt.Errorf("%w (add %s to the relinked kinds, or grant get on it)", err, gk)
	}
	if err != nil {
		return false, foundOwner{}, err
	}
	if owner.GetDeletionTimestamp() != nil {
		return false, foundOwner{}, nil
	}
	apiVersion := o.APIVersion
	if o.Version() != served.Version {
		if _, err := r.mapper.RESTMapping(gk, o.Version()); err != nil {
			// The version recorded is no longer served: use one that is.
			apiVersion = served.GroupVersion().String()
		}
	}
	return true, foundOwner{ref: o, apiVersion: apiVersion, uid: owner.GetUID()}, nil
}

// link returns existing with a reference to every found owner: references
// that already point at the owner's UID are kept as they are, references to
// the owner with another UID are replaced, and missing ones are appended.
// An owner recorded as controller is linked as controller only when no
// other reference is a controller; demoted lists those that were not.
func link(existing []metav1.OwnerReference, found []foundOwner) (refs []metav1.OwnerReference, changed bool, demoted []OwnerRef) {
	refs = slices.Clone(existing)
	for _, f := range found {
		idx := slices.IndexFunc(refs, func(r metav1.OwnerReference) bool { return keyOf(r) == f.ref.key() })
		if idx >= 0 && refs[idx].UID == f.uid {
			continue
		}
		ref := metav1.OwnerReference{
			APIVersion:         f.apiVersion,
			Kind:               f.ref.Kind,
			Name:               f.ref.Name,
			UID:                f.uid,
			Controller:         cloneBool(f.ref.Controller),
			BlockOwnerDeletion: cloneBool(f.ref.BlockOwnerDeletion),
		}
		if f.ref.IsController() && hasOtherController(refs, idx) {
			ref.Controller = nil
			demoted = append(demoted, f.ref)
		}
		if idx >= 0 {
			refs[idx] = ref
		} else {
			refs = append(refs, ref)
		}
		changed = true
	}
	return refs, changed, demoted
}

func hasOtherController(refs []metav1.OwnerReference, skip int) bool {
	for i, r := range refs {
		if i != skip && r.Controller != nil && *r.Controller {
			return true
		}
	}
	return false
}

// patch writes the ownerReferences and, when every owner is linked, removes
// the annotation, in one JSON merge patch conditional on the
// resourceVersion read.
func (r *Relinker) patch(ctx context.Context, k *kind, req Request, obj client.Object, refs []metav1.OwnerReference, setRefs, removeAnnotation bool) error {
	m := map[string]any{"resourceVersion": obj.GetResourceVersion()}
	if setRefs {
		m["ownerReferences"] = refs
	}
	if removeAnnotation {
		m["annotations"] = map[string]any{Annotation: nil}
	}
	body, err := json.Marshal(map[string]any{"metadata": m})
	if err != nil {
		return err
	}
	target := &metav1.PartialObjectMetadata{}
	target.SetGroupVersionKind(k.gvk)
	target.SetNamespace(obj.GetNamespace())
	target.SetName(obj.GetName())
	// Recorded before the patch: the update event it causes may be handled
	// before Patch returns, and clears the record.
	r.mu.Lock()
	r.written[req] = obj.GetResourceVersion()
	r.mu.Unlock()
	if err := r.client.Patch(ctx, target, client.RawPatch(types.MergePatchType, body)); err != nil {
		r.mu.Lock()
		delete(r.written, req)
		r.mu.Unlock()
		return err
	}
	return nil
}

// WaitForCacheSync waits until the relinker's cache has synced, or ctx
// ends; it reports whether the cache synced.
func (r *Relinker) WaitForCacheSync(ctx context.Context) bool {
	return r.cache != nil && r.cache.WaitForCacheSync(ctx)
}

// Waiting returns the objects waiting for an owner, for tests and
// diagnostics.
func (r *Relinker) Waiting() []Request {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := make([]Request, 0, len(r.waiting))
	for req := range r.waiting {
		out = append(out, req)
	}
	slices.SortFunc(out, func(a, b Request) int { return strings.Compare(a.String(), b.String()) })
	return out
}
