package relink

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/go-logr/logr"
	"github.com/prometheus/client_golang/prometheus"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/discovery"
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
)

// Event reasons.
const (
	// ReasonOwnerNotFound is the reason of the Warning event recorded on an
	// object whose recorded owner has not come back after Options.WarnAfter.
	ReasonOwnerNotFound = "OwnerNotFound"
	// ReasonOwnerNotProven is the reason of the Warning event recorded on
	// an object, after Options.WarnAfter, when an object of a recorded
	// owner's kind and name exists but the link rule (Judge) does not
	// prove it to be the backed-up owner; the note says why.
	ReasonOwnerNotProven = "OwnerNotProven"
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
	// Clock defaults to the real clock. It times the warnings,
	// DiscoveryRetry and the owners' live reads: whether a read is fresh
	// enough to confirm a patch (ConfirmFor), and when an idle owner's
	// reads are forgotten.
	Clock clock.WithDelayedExecution
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
	opts  Options
	kinds []*kind
	byGK  map[schema.GroupKind]*kind
	cache cache.Cache
	// objects reads the objects relinked and their owners of watched
	// kinds: the cache, or the client of NewForClient.
	objects client.Reader
	// client reads live and patches, never through a cache.
	client client.Client
	// live reads owners live, batched per owner.
	live     *liveReads
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
	cfg, hc, err := restConfig(mgr)
	if err != nil {
		return err
	}
	dc, err := discovery.NewDiscoveryClientForConfigAndClient(cfg, hc)
	if err != nil {
		return fmt.Errorf("setting up the relinker: %w", err)
	}
	mapper, err := newKindMapper(dc, r.opts.Clock)
	if err != nil {
		return fmt.Errorf("setting up the relinker: discovering the API server's kinds: %w", err)
	}
	live, err := client.New(cfg, client.Options{HTTPClient: hc, Scheme: mgr.GetScheme(), Mapper: mapper})
	if err != nil {
		return fmt.Errorf("setting up the relinker: %w", err)
	}
	skipped, err := r.use(mapper, live, mgr.GetEventRecorder("initlock-relinker"))
	if err != nil {
		return fmt.Errorf("setting up the relinker: %w", err)
	}
	log := mgr.GetLogger().WithName(ControllerName)
	if len(skipped) > 0 {
		log.Info("Kinds not served by the API server are not relinked", "kinds", skipped)
	}
	if r.cache, err = r.newCache(mgr, cfg, hc); err != nil {
		return err
	}
	r.objects = r.cache
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

// NewForClient returns a Relinker that works through c alone and that
// nothing starts: it resolves the kinds with c's RESTMapper, reads the
// objects and the owners of watched kinds through c where the relinker of
// SetupWithManager reads its cache, reads owners live and patches through
// c, and records events with rec. Nothing watches: its caller calls
// Reconcile. Options.Selectors and Options.Namespace, which restrict the
// cache, restrict nothing here. It serves tests of Reconcile, on the model
// API server (internal/kubeenv/apimodel) as on a real one.
func NewForClient(opts Options, c client.Client, rec recorder.EventRecorder) (*Relinker, error) {
	r := New(opts)
	if _, err := r.use(c.RESTMapper(), c, rec); err != nil {
		return nil, fmt.Errorf("setting up the relinker: %w", err)
	}
	r.objects = c
	return r, nil
}

// use resolves the relinked kinds with mapper, and readies the relinker to
// read owners live and patch through c and to record events with rec. It
// returns the default kinds the API server does not serve.
func (r *Relinker) use(mapper meta.RESTMapper, c client.Client, rec recorder.EventRecorder) ([]schema.GroupKind, error) {
	kinds := r.opts.Kinds
	defaults := kinds == nil
	if defaults {
		kinds = DefaultKinds()
	}
	resolved, skipped, err := resolveKinds(mapper, kinds, defaults, r.opts.Selectors)
	if err != nil {
		return nil, err
	}
	r.byGK = map[schema.GroupKind]*kind{}
	for i := range resolved {
		k := &resolved[i]
		r.kinds = append(r.kinds, k)
		r.byGK[k.gvk.GroupKind()] = k
	}
	r.mapper, r.client, r.recorder = mapper, c, rec
	r.live = newLiveReads(c, r.opts.Clock)
	if r.metrics, err = newMetrics(r.opts.Registry, r.kinds); err != nil {
		return nil, err
	}
	return skipped, nil
}

// Reconcile links one object to the owners its Annotation records, as far
// as the link rule (Judge) proves them.
func (r *Relinker) Reconcile(ctx context.Context, req Request) (ctrl.Result, error) {
	log := ctrl.LoggerFrom(ctx)
	k, ok := r.byGK[req.GVK.GroupKind()]
	if !ok {
		return ctrl.Result{}, reconcile.TerminalError(fmt.Errorf("%s: kind is not relinked", req))
	}
	obj := k.newObject()
	if err := r.objects.Get(ctx, req.NamespacedName, obj); err != nil {
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
	clusters, err := r.clustersOf(ctx, k, obj, owners)
	if err != nil {
		return ctrl.Result{}, err
	}
	if name := pausedCluster(clusters); name != "" {
		log.V(4).Info("Cluster is paused, not relinking", "cluster", klog.KRef(obj.GetNamespace(), name))
		r.forget(req, false)
		return ctrl.Result{}, nil
	}
	if filtered, retry := r.filtered(obj, clusters); filtered {
		r.forget(req, false)
		if retry {
			return ctrl.Result{RequeueAfter: r.opts.MaxBackoff}, nil
		}
		return ctrl.Result{}, nil
	}
	seen := r.firstSeen(req)
	judged, targets, live, err := r.judgeCached(ctx, k, obj, owners)
	if err != nil {
		return ctrl.Result{}, err
	}
	all, res, err := r.relink(ctx, k, req, obj, judged, targets, live, seen)
	if err != nil || res != nil {
		return ptr.Deref(res, ctrl.Result{}), err
	}
	if all {
		r.forget(req, false)
		r.metrics.linked.WithLabelValues(k.gvk.Group, k.gvk.Kind).Inc()
		log.V(2).Info("Relinked to the recorded owners", "owners", len(owners))
		return ctrl.Result{}, nil
	}
	return r.wait(ctx, req, obj, judged, seen), nil
}

// WaitForCacheSync waits until the relinker's cache has synced, or ctx
// ends; it reports whether the cache synced.
func (r *Relinker) WaitForCacheSync(ctx context.Context) bool {
	return r.cache != nil && r.cache.WaitForCacheSync(ctx)
}
