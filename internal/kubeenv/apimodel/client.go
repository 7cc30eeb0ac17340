package apimodel

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"

	admissionv1 "k8s.io/api/admissionregistration/v1"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/initlock/initlock/internal/kubeenv"
	"github.com/initlock/initlock/pkg/initlock/capi"
)

// Request is one API request of a Client, as the Gate sees it.
type Request struct {
	// Actor is the Client's name.
	Actor string
	// Verb is get, list, create, patch, update or delete.
	Verb string
	// Key names the object; for a list, its kind and namespace (empty for
	// every namespace), with no name.
	Key Key
	// Body is the patch, or the object created or updated, as JSON; for a
	// delete, its preconditions; for a list, its label selector.
	Body string

	exec func() (map[string]any, error)
	// Result and Err are what the request answers.
	Result map[string]any
	Err    error
}

// Write tells whether the request changes the store when it is applied.
func (r *Request) Write() bool { return r.Verb != "get" && r.Verb != "list" }

// Serve applies the request now and answers with what the store answered.
func (r *Request) Serve() { r.Result, r.Err = r.exec() }

// Gate decides when each request of a Client reaches the store and what
// its caller gets back: the explorer implements it to schedule requests and
// inject faults. Serve returns once the request's Result and Err are set.
type Gate interface {
	Serve(ctx context.Context, r *Request)
}

// Client is a controller-runtime client of the model API server, for one
// actor. It reads, lists and writes ConfigMaps and Deployments (typed),
// Clusters (unstructured) and Machines (unstructured or metadata-only) of
// the Cluster API v1beta2 group, and the cluster-scoped
// ValidatingAdmissionPolicies and their bindings (typed). Every request goes through the Gate, or straight to the store
// without one.
type Client struct {
	Store *Store
	Gate  Gate
	Actor string
}

var _ client.WithWatch = (*Client)(nil)

var scheme = kubeenv.Scheme()

func kindOf(obj runtime.Object) (string, error) {
	switch o := obj.(type) {
	case *corev1.ConfigMap:
		return "ConfigMap", nil
	case *appsv1.Deployment:
		return "Deployment", nil
	case *admissionv1.ValidatingAdmissionPolicy:
		return "ValidatingAdmissionPolicy", nil
	case *admissionv1.ValidatingAdmissionPolicyBinding:
		return "ValidatingAdmissionPolicyBinding", nil
	case *unstructured.Unstructured:
		return o.GetKind(), nil
	case *metav1.PartialObjectMetadata:
		return o.GetObjectKind().GroupVersionKind().Kind, nil
	}
	return "", fmt.Errorf("apimodel: %T is not served", obj)
}

func keyOf(obj client.Object) (Key, error) {
	kind, err := kindOf(obj)
	if err != nil {
		return Key{}, err
	}
	return Key{Kind: kind, Namespace: obj.GetNamespace(), Name: obj.GetName()}, nil
}

func (c *Client) do(ctx context.Context, verb string, k Key, body string, exec func() (map[string]any, error)) (map[string]any, error) {
	r := &Request{Actor: c.Actor, Verb: verb, Key: k, Body: body, exec: exec}
	if c.Gate == nil {
		r.Serve()
	} else {
		c.Gate.Serve(ctx, r)
	}
	return r.Result, r.Err
}

// Get reads the object live.
func (c *Client) Get(ctx context.Context, key client.ObjectKey, obj client.Object, _ ...client.GetOption) error {
	kind, err := kindOf(obj)
	if err != nil {
		return err
	}
	k := Key{Kind: kind, Namespace: key.Namespace, Name: key.Name}
	res, err := c.do(ctx, "get", k, "", func() (map[string]any, error) { return c.Store.Get(k) })
	if err != nil {
		return err
	}
	return fill(obj, res)
}

// Fill sets obj from a stored object, in obj's form.
func Fill(obj client.Object, stored map[string]any) error {
	return fill(obj, deepCopy(stored))
}

// fill sets obj from m, a copy the caller gives up: obj may keep parts of
// it. The store's reads and writes answer with such copies.
func fill(obj client.Object, m map[string]any) error {
	switch o := obj.(type) {
	case *unstructured.Unstructured:
		gvk := o.GroupVersionKind()
		o.Object = m
		if gvk.Kind != "" {
			o.SetGroupVersionKind(gvk)
		}
		return nil
	case *metav1.PartialObjectMetadata:
		gvk := o.GroupVersionKind()
		o.ObjectMeta = metav1.ObjectMeta{}
		if err := runtime.DefaultUnstructuredConverter.FromUnstructured(metadata(m), &o.ObjectMeta); err != nil {
			return err
		}
		o.SetGroupVersionKind(gvk)
		return nil
	}
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(m, obj); err != nil {
		return err
	}
	if gvks, _, err := scheme.ObjectKinds(obj); err == nil && len(gvks) > 0 {
		obj.GetObjectKind().SetGroupVersionKind(gvks[0])
	}
	return nil
}

func toMap(obj client.Object) (map[string]any, error) {
	m, err := runtime.DefaultUnstructuredConverter.ToUnstructured(obj)
	if err != nil {
		return nil, err
	}
	return normalize(m), nil
}

// Create creates obj.
func (c *Client) Create(ctx context.Context, obj client.Object, _ ...client.CreateOption) error {
	return c.put(ctx, "create", obj, c.Store.Create)
}

// Update replaces obj.
func (c *Client) Update(ctx context.Context, obj client.Object, _ ...client.UpdateOption) error {
	return c.put(ctx, "update", obj, c.Store.Update)
}

// put writes the whole of obj with write (the store's create or update) as
// request verb, and fills obj with what the store holds then.
func (c *Client) put(ctx context.Context, verb string, obj client.Object, write func(Key, map[string]any) (map[string]any, error)) error {
	k, err := keyOf(obj)
	if err != nil {
		return err
	}
	m, err := toMap(obj)
	if err != nil {
		return err
	}
	body, _ := json.Marshal(m)
	res, err := c.do(ctx, verb, k, string(body), func() (map[string]any, error) { return write(k, m) })
	if err != nil {
		return err
	}
	return fill(obj, res)
}

// Patch patches obj with a JSON patch or a merge patch.
func (c *Client) Patch(ctx context.Context, obj client.Object, patch client.Patch, _ ...client.PatchOption) error {
	k, err := keyOf(obj)
	if err != nil {
		return err
	}
	data, err := patch.Data(obj)
	if err != nil {
		return err
	}
	pt := patch.Type()
	res, err := c.do(ctx, "patch", k, string(data), func() (map[string]any, error) { return c.Store.Patch(k, pt, data) })
	if err != nil {
		return err
	}
	return fill(obj, res)
}

// Delete deletes obj, with the UID and resourceVersion preconditions, the
// propagation policy and orphanDependents of opts.
func (c *Client) Delete(ctx context.Context, obj client.Object, opts ...client.DeleteOption) error {
	k, err := keyOf(obj)
	if err != nil {
		return err
	}
	do := (&client.DeleteOptions{}).ApplyOptions(opts)
	var uid *types.UID
	var rv *string
	if do.Preconditions != nil {
		uid, rv = do.Preconditions.UID, do.Preconditions.ResourceVersion
	}
	body := ""
	if uid != nil || rv != nil {
		body = fmt.Sprintf("preconditions uid=%v rv=%v", deref(uid), deref(rv))
	}
	del := do.AsDeleteOptions()
	if del.PropagationPolicy != nil {
		body = strings.TrimSpace(body + " propagation=" + string(*del.PropagationPolicy))
	}
	orphan := del.OrphanDependents //nolint:staticcheck // deprecated, still sent by some clients: the guard reads it
	if orphan != nil {
		body = strings.TrimSpace(body + fmt.Sprintf(" orphanDependents=%t", *orphan))
	}
	req := DeleteRequest{UID: uid, ResourceVersion: rv, Propagation: del.PropagationPolicy, OrphanDependents: orphan}
	_, err = c.do(ctx, "delete", k, body, func() (map[string]any, error) { return nil, c.Store.DeleteWith(k, req) })
	return err
}

func deref[T any](p *T) any {
	if p == nil {
		return nil
	}
	return *p
}

// Watch is not served: the model has no watches.
func (c *Client) Watch(context.Context, client.ObjectList, ...client.ListOption) (watch.Interface, error) {
	return nil, apierrors.NewMethodNotSupported(schema.GroupResource{}, "watch")
}

// DeleteAllOf is not served.
func (c *Client) DeleteAllOf(context.Context, client.Object, ...client.DeleteAllOfOption) error {
	return apierrors.NewMethodNotSupported(schema.GroupResource{}, "deletecollection")
}

// Apply is not served.
func (c *Client) Apply(context.Context, runtime.ApplyConfiguration, ...client.ApplyOption) error {
	return apierrors.NewMethodNotSupported(schema.GroupResource{}, "apply")
}

// Status is not served: status is changed by the model's events.
func (c *Client) Status() client.SubResourceWriter { return noSubResource{} }

// SubResource is not served.
func (c *Client) SubResource(string) client.SubResourceClient { return noSubResource{} }

// Scheme has the built-in types; Cluster API objects are unstructured.
func (c *Client) Scheme() *runtime.Scheme { return scheme }

// RESTMapper maps the kinds the model serves to their resources; a kind
// asked for without a version maps to the version served.
func (c *Client) RESTMapper() meta.RESTMapper { return restMapper }

var restMapper = func() meta.RESTMapper {
	m := meta.NewDefaultRESTMapper([]schema.GroupVersion{corev1.SchemeGroupVersion, ClusterGVK.GroupVersion()})
	m.Add(corev1.SchemeGroupVersion.WithKind("ConfigMap"), meta.RESTScopeNamespace)
	m.Add(appsv1.SchemeGroupVersion.WithKind("Deployment"), meta.RESTScopeNamespace)
	m.Add(ClusterGVK, meta.RESTScopeNamespace)
	m.Add(MachineGVK, meta.RESTScopeNamespace)
	for kind := range clusterScoped {
		m.Add(admissionv1.SchemeGroupVersion.WithKind(kind), meta.RESTScopeRoot)
	}
	return m
}()

// GroupVersionKindFor returns obj's kind.
func (c *Client) GroupVersionKindFor(obj runtime.Object) (schema.GroupVersionKind, error) {
	if k := obj.GetObjectKind().GroupVersionKind(); k.Kind != "" {
		return k, nil
	}
	gvks, _, err := scheme.ObjectKinds(obj)
	if err != nil {
		return schema.GroupVersionKind{}, err
	}
	return gvks[0], nil
}

// IsObjectNamespaced tells whether obj's kind is namespaced: every kind
// served is but the admission policies and their bindings.
func (c *Client) IsObjectNamespaced(obj runtime.Object) (bool, error) {
	gvk, err := c.GroupVersionKindFor(obj)
	if err != nil {
		return false, err
	}
	return !clusterScoped[gvk.Kind], nil
}

// clusterScoped are the kinds served that have no namespace.
var clusterScoped = map[string]bool{"ValidatingAdmissionPolicy": true, "ValidatingAdmissionPolicyBinding": true}

type noSubResource struct{}

func (noSubResource) Create(context.Context, client.Object, client.Object, ...client.SubResourceCreateOption) error {
	return apierrors.NewMethodNotSupported(schema.GroupResource{}, "subresource")
}

func (noSubResource) Update(context.Context, client.Object, ...client.SubResourceUpdateOption) error {
	return apierrors.NewMethodNotSupported(schema.GroupResource{}, "subresource")
}

func (noSubResource) Patch(context.Context, client.Object, client.Patch, ...client.SubResourcePatchOption) error {
	return apierrors.NewMethodNotSupported(schema.GroupResource{}, "subresource")
}

func (noSubResource) Apply(context.Context, runtime.ApplyConfiguration, ...client.SubResourceApplyOption) error {
	return apierrors.NewMethodNotSupported(schema.GroupResource{}, "subresource")
}

func (noSubResource) Get(context.Context, client.Object, client.Object, ...client.SubResourceGetOption) error {
	return apierrors.NewMethodNotSupported(schema.GroupResource{}, "subresource")
}

// served are the resources of the kinds the model serves.
var served = map[string]schema.GroupVersionResource{
	"ConfigMap":                        {Version: "v1", Resource: "configmaps"},
	"Deployment":                       {Group: "apps", Version: "v1", Resource: "deployments"},
	ClusterGVK.Kind:                    {Group: ClusterGVK.Group, Version: ClusterGVK.Version, Resource: "clusters"},
	MachineGVK.Kind:                    {Group: MachineGVK.Group, Version: MachineGVK.Version, Resource: "machines"},
	"ValidatingAdmissionPolicy":        admissionv1.SchemeGroupVersion.WithResource("validatingadmissionpolicies"),
	"ValidatingAdmissionPolicyBinding": admissionv1.SchemeGroupVersion.WithResource("validatingadmissionpolicybindings"),
}

// ClusterGVK and MachineGVK are the kinds the model serves for Cluster API.
var (
	ClusterGVK = capi.ClusterGVK(capi.V1Beta2)
	MachineGVK = capi.MachineGVK(capi.V1Beta2)
)
