package relink

import (
	"fmt"
	"net/http"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// UserAgent ends the User-Agent of every request the relinker makes (its
// cache's, its live reads', its patches' and its discovery's), so that
// the API server's audit log, and a proxy, tell them from the manager's.
const UserAgent = "initlock-relinker"

// restConfig is the manager's rest.Config with the relinker's User-Agent,
// and an HTTP client of its own that sends it (the manager's sets the
// manager's).
func restConfig(mgr ctrl.Manager) (*rest.Config, *http.Client, error) {
	cfg := rest.CopyConfig(mgr.GetConfig())
	ua := cfg.UserAgent
	if ua == "" {
		ua = rest.DefaultKubernetesUserAgent()
	}
	cfg.UserAgent = ua + " " + UserAgent
	hc, err := rest.HTTPClientFor(cfg)
	if err != nil {
		return nil, nil, fmt.Errorf("setting up the relinker's HTTP client: %w", err)
	}
	return cfg, hc, nil
}

// cacheRunnable lets the manager start the relinker's cache with its own
// caches, before the controllers.
type cacheRunnable struct{ cache.Cache }

func (c cacheRunnable) GetCache() cache.Cache { return c.Cache }

func (r *Relinker) newCache(mgr ctrl.Manager, cfg *rest.Config, hc *http.Client) (cache.Cache, error) {
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
		HTTPClient:                  hc,
		Scheme:                      mgr.GetScheme(),
		Mapper:                      r.mapper,
		ByObject:                    byObject,
		DefaultTransform:            cache.TransformStripManagedFields(),
		ReaderFailOnMissingInformer: true,
	}
	if r.opts.Namespace != "" {
		opts.DefaultNamespaces = map[string]cache.Config{r.opts.Namespace: {}}
	}
	c, err := cache.New(cfg, opts)
	if err != nil {
		return nil, fmt.Errorf("setting up the relinker's cache: %w", err)
	}
	return c, nil
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
