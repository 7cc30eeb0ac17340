package velerosim

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"slices"

	"github.com/sirupsen/logrus"
	velerov1 "github.com/vmware-tanzu/velero/pkg/apis/velero/v1"
	velerodiscovery "github.com/vmware-tanzu/velero/pkg/discovery"
	"github.com/vmware-tanzu/velero/pkg/label"
	"github.com/vmware-tanzu/velero/pkg/plugin/framework"
	veleroplugin "github.com/vmware-tanzu/velero/pkg/plugin/velero"
	riav2 "github.com/vmware-tanzu/velero/pkg/plugin/velero/restoreitemaction/v2"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/apiutil"

	"github.com/initlock/initlock/internal/kubeenv"
)

// Options shape a simulated restore. The zero value restores as
// "velero restore create --from-backup backup-1" does, in Velero's order.
type Options struct {
	// NamespaceMapping maps backed-up namespaces to the namespaces items are
	// restored into, as --namespace-mappings does.
	NamespaceMapping map[string]string
	// Naive makes a naive copy instead of a Velero restore: ownerReferences
	// are kept with the old owners' UIDs, no Velero label is added and no
	// action runs.
	Naive bool
	// StatusResources are the resources whose status is restored, written
	// as for --status-include-resources ("localmachines.example.io", or
	// "*" for all); the status of the others is dropped.
	StatusResources []string
	// AsGiven creates the items in the order given instead of Velero's.
	AsGiven bool
	// Workers, above 1, creates up to that many items of one resource at
	// once, where Velero creates them one after the other: the items of a
	// resource still all come before those of the next, but in no set
	// order among themselves. For benchmarks that restore thousands of
	// objects.
	Workers int
	// BackupName and RestoreName are the names items are labelled with;
	// "backup-1" and "restore-1" when empty.
	BackupName, RestoreName string
	// Actions are restore item actions to run on the items they apply to.
	Actions []riav2.RestoreItemAction
	// ExistingResourcePolicy is what becomes of an item whose object
	// exists already, as --existing-resource-policy says: PolicyTypeNone
	// skips it, as Velero does by default, and PolicyTypeUpdate patches
	// the existing object towards the backed-up one and labels it with the
	// restore (see existing.go). Empty fails the restore with the API
	// server's AlreadyExists error, so that a test never mistakes a
	// leftover for a restored object.
	ExistingResourcePolicy velerov1.PolicyType
}

// Restorer restores backed-up objects into one API server. Restore is not
// safe for concurrent use; Item and ActionInput are.
type Restorer struct {
	c       client.Client
	opts    Options
	restore *velerov1.Restore
	actions []framework.RestoreItemResolvedActionV2
	log     logrus.FieldLogger
}

// New returns a Restorer that creates objects through cfg (an admin, as the
// Velero server is). Actions are resolved here against the API server's
// discovery, as Velero resolves them at the start of a restore.
func New(cfg *rest.Config, opts Options) (*Restorer, error) {
	c, err := client.New(cfg, client.Options{Scheme: kubeenv.Scheme()})
	if err != nil {
		return nil, fmt.Errorf("restore client: %w", err)
	}
	r := NewForClient(c, opts)
	if len(opts.Actions) > 0 && !opts.Naive {
		dc, err := discovery.NewDiscoveryClientForConfig(cfg)
		if err != nil {
			return nil, fmt.Errorf("discovery client: %w", err)
		}
		helper, err := velerodiscovery.NewHelper(dc, r.log)
		if err != nil {
			return nil, fmt.Errorf("discovering resources: %w", err)
		}
		if r.actions, err = framework.NewRestoreItemActionResolverV2(opts.Actions).ResolveActions(helper, r.log); err != nil {
			return nil, fmt.Errorf("resolving restore item actions: %w", err)
		}
	}
	return r, nil
}

// NewForClient returns a Restorer that creates objects through c, which
// must have a RESTMapper that knows the items' kinds. It runs no restore
// item actions: they are resolved against an API server's discovery (New).
// The model API server of the explorer restores through it.
func NewForClient(c client.Client, opts Options) *Restorer {
	if opts.BackupName == "" {
		opts.BackupName = "backup-1"
	}
	if opts.RestoreName == "" {
		opts.RestoreName = "restore-1"
	}
	opts.Actions = nil
	quiet := logrus.New()
	quiet.SetOutput(io.Discard)
	return &Restorer{c: c, opts: opts, log: quiet, restore: &velerov1.Restore{
		ObjectMeta: metav1.ObjectMeta{Namespace: "velero", Name: opts.RestoreName},
		Spec:       velerov1.RestoreSpec{BackupName: opts.BackupName, NamespaceMapping: opts.NamespaceMapping},
	}}
}

// Restore creates items as the restore does and returns them as the API
// server created them, in the order they were created (with Workers, in
// the order they were given to the workers). It stops at the first error,
// naming the item.
func (r *Restorer) Restore(ctx context.Context, items []*unstructured.Unstructured) ([]*unstructured.Unstructured, error) {
	if !r.opts.AsGiven {
		var err error
		if items, err = r.Sort(items); err != nil {
			return nil, err
		}
	}
	if r.opts.Workers > 1 {
		return r.restoreByResource(ctx, items)
	}
	out := make([]*unstructured.Unstructured, 0, len(items))
	for _, backed := range items {
		obj, err := r.restoreItem(ctx, backed)
		if err != nil {
			return out, err
		}
		if obj != nil {
			out = append(out, obj)
		}
	}
	return out, nil
}

// restoreItem creates one backed-up item as the restore does, with its
// status and managedFields, and returns it as created: nil when an action
// asks to skip it, or when it exists and the ExistingResourcePolicy skips
// it. An existing object updated under PolicyTypeUpdate is returned as
// updated.
func (r *Restorer) restoreItem(ctx context.Context, backed *unstructured.Unstructured) (*unstructured.Unstructured, error) {
	obj, err := r.Item(backed)
	if err != nil || obj == nil {
		return nil, err
	}
	if err := r.c.Create(ctx, obj); err != nil {
		if apierrors.IsAlreadyExists(err) && r.opts.ExistingResourcePolicy != "" && !r.opts.Naive {
			return r.restoreExisting(ctx, obj)
		}
		return nil, fmt.Errorf("restoring %s %s/%s: %w", obj.GetKind(), obj.GetNamespace(), obj.GetName(), err)
	}
	if len(r.opts.StatusResources) > 0 && !r.opts.Naive {
		gr, err := r.resource(obj)
		if err != nil {
			return nil, err
		}
		if slices.Contains(r.opts.StatusResources, "*") || slices.Contains(r.opts.StatusResources, gr.String()) {
			if err := r.restoreStatus(ctx, backed, obj); err != nil {
				return nil, err
			}
		}
	}
	if err := r.restoreManagedFields(ctx, backed, obj); err != nil {
		return nil, err
	}
	return obj, nil
}

// restoreManagedFields sets the created object's managedFields back to the
// backed-up ones with a merge patch, as Velero does after the create: the
// API server would otherwise have recorded the restore's own changes (the
// labels, the plugin's annotation, webhook defaults) under the managers of
// the backup.
func (r *Restorer) restoreManagedFields(ctx context.Context, backed, created *unstructured.Unstructured) error {
	mf := backed.GetManagedFields()
	if len(mf) == 0 || r.opts.Naive {
		return nil
	}
	body, err := json.Marshal(map[string]any{"metadata": map[string]any{"managedFields": mf}})
	if err != nil {
		return err
	}
	if err := r.c.Patch(ctx, created, client.RawPatch(types.MergePatchType, body)); err != nil {
		return fmt.Errorf("restoring the managedFields of %s %s/%s: %w", created.GetKind(), created.GetNamespace(), created.GetName(), err)
	}
	return nil
}

// restoreStatus writes the backed-up status through the status
// subresource, as Velero does after the create. Kinds without a status
// subresource keep what the create wrote, as in Velero, where the update
// fails with a warning.
func (r *Restorer) restoreStatus(ctx context.Context, backed, created *unstructured.Unstructured) error {
	status, ok := backed.Object["status"]
	if !ok {
		return nil
	}
	created.Object["status"] = status
	err := r.c.Status().Update(ctx, created)
	if apierrors.IsNotFound(err) {
		delete(created.Object, "status")
		return nil
	}
	if err != nil {
		return fmt.Errorf("restoring the status of %s %s/%s: %w", created.GetKind(), created.GetNamespace(), created.GetName(), err)
	}
	return nil
}

// ActionInput returns the item Velero passes to restore item actions for a
// backed-up object: its metadata reset and its status dropped, still in its
// backed-up namespace and without the restore labels.
func (r *Restorer) ActionInput(backed *unstructured.Unstructured) (*unstructured.Unstructured, error) {
	return resetMetadataAndStatus(backed.DeepCopy(), !r.opts.Naive)
}

// resetMetadataAndStatus removes from obj the metadata a restore resets
// (ownerReferences too, when owners) and its status, as Velero's
// resetMetadataAndStatus does, and returns obj.
func resetMetadataAndStatus(obj *unstructured.Unstructured, owners bool) (*unstructured.Unstructured, error) {
	md, ok := obj.Object["metadata"].(map[string]any)
	if !ok {
		return nil, fmt.Errorf("%s %s has no metadata", obj.GetKind(), obj.GetName())
	}
	for _, f := range []string{"generateName", "selfLink", "uid", "resourceVersion", "generation",
		"creationTimestamp", "deletionTimestamp", "deletionGracePeriodSeconds"} {
		delete(md, f)
	}
	if owners {
		delete(md, "ownerReferences")
	}
	delete(obj.Object, "status")
	return obj, nil
}

// Item returns what the restore creates for one backed-up object, without
// creating it: nil when an action asks to skip it. It is safe for
// concurrent use.
func (r *Restorer) Item(backed *unstructured.Unstructured) (*unstructured.Unstructured, error) {
	obj, err := r.ActionInput(backed)
	if err != nil {
		return nil, err
	}
	if r.opts.Naive {
		r.mapNamespace(obj)
		return obj, nil
	}
	if len(r.actions) > 0 {
		gr, err := r.resource(obj)
		if err != nil {
			return nil, err
		}
		for _, a := range r.actions {
			if !a.ShouldUse(gr, r.targetNamespace(obj), obj, r.log) {
				continue
			}
			res, err := a.Execute(&veleroplugin.RestoreItemActionExecuteInput{Item: obj, ItemFromBackup: backed, Restore: r.restore})
			if err != nil {
				return nil, fmt.Errorf("restore item action %s on %s %s/%s: %w", a.Name(), gr, backed.GetNamespace(), backed.GetName(), err)
			}
			if res.SkipRestore {
				return nil, nil
			}
			u, ok := res.UpdatedItem.(*unstructured.Unstructured)
			if !ok {
				return nil, fmt.Errorf("restore item action %s returned a %T for %s", a.Name(), res.UpdatedItem, backed.GetName())
			}
			obj = u
		}
	}
	r.mapNamespace(obj)
	return setRestoreLabels(obj, label.GetValidName(r.opts.RestoreName), label.GetValidName(r.opts.BackupName)), nil
}

// Unstructured converts objects, typed or not, to the unstructured form the
// Restorer takes; typed objects get their kind from kubeenv's scheme.
func Unstructured[O client.Object](objs ...O) ([]*unstructured.Unstructured, error) {
	out := make([]*unstructured.Unstructured, 0, len(objs))
	scheme := kubeenv.Scheme()
	for _, o := range objs {
		if u, ok := any(o).(*unstructured.Unstructured); ok {
			out = append(out, u.DeepCopy())
			continue
		}
		gvk, err := apiutil.GVKForObject(o, scheme)
		if err != nil {
			return nil, fmt.Errorf("kind of %T %s: %w", o, o.GetName(), err)
		}
		m, err := runtime.DefaultUnstructuredConverter.ToUnstructured(o)
		if err != nil {
			return nil, fmt.Errorf("converting %s %s: %w", gvk.Kind, o.GetName(), err)
		}
		u := &unstructured.Unstructured{Object: m}
		u.SetGroupVersionKind(gvk)
		out = append(out, u)
	}
	return out, nil
}

func (r *Restorer) targetNamespace(obj *unstructured.Unstructured) string {
	if to, ok := r.opts.NamespaceMapping[obj.GetNamespace()]; ok {
		return to
	}
	return obj.GetNamespace()
}

func (r *Restorer) mapNamespace(obj *unstructured.Unstructured) {
	if obj.GetNamespace() != "" {
		obj.SetNamespace(r.targetNamespace(obj))
	}
}

// resource returns the group and plural resource of obj's kind.
func (r *Restorer) resource(obj *unstructured.Unstructured) (schema.GroupResource, error) {
	gvk := obj.GroupVersionKind()
	m, err := r.c.RESTMapper().RESTMapping(gvk.GroupKind(), gvk.Version)
	if err != nil {
		return schema.GroupResource{}, fmt.Errorf("resource of %s %s: %w", gvk, obj.GetName(), err)
	}
	return m.Resource.GroupResource(), nil
}
