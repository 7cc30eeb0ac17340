package inventory

import (
	"context"
	"fmt"
	"sort"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/initlock/initlock/pkg/initlock"

	"github.com/initlock/initlock/pkg/initlock/capi"
	"github.com/initlock/initlock/pkg/initlock/keeper"
)

// DefaultPageSize is the page size of every list Gather makes.
const DefaultPageSize = 500

// Options say what to gather.
type Options struct {
	// Namespace limits the inventory to one namespace; "" means all.
	Namespace string
	// CAPIVersion is the Cluster API version to read Clusters and Machines
	// in (capi.V1Beta2 or capi.V1Beta1); see capi.Discover.
	CAPIVersion string
	// PageSize of each list; DefaultPageSize when 0.
	PageSize int64
	// ClusterSelector, when set, limits the inventory to the Clusters whose
	// labels it selects (the API server filters the list of Clusters). A
	// lock whose Cluster is not selected, or does not exist (an orphan), is
	// then left out.
	ClusterSelector labels.Selector
	// Policy and Now are what each lock's decision is taken with.
	Policy keeper.Policy
	Now    time.Time
}

// Entry is one cluster's lock as observed.
type Entry struct {
	// Namespace and ClusterName name the cluster the lock belongs to; the
	// Cluster itself may not exist (Status.ClusterExists).
	Namespace, ClusterName string
	// LockName is the lock's ConfigMap name, "<cluster>-lock".
	LockName string
	// ConfigMap is the ConfigMap with the lock's name, nil when there is
	// none.
	ConfigMap *corev1.ConfigMap
	// Status is what keeper.Inspect read and decided.
	Status keeper.Status
	// ClusterLabels are the labels of the Cluster, as Gather listed it; nil
	// when it does not exist, and not set by Observe.
	ClusterLabels map[string]string
}

// Inventory is every lock found.
type Inventory struct {
	// CAPIVersion is the Cluster API version read.
	CAPIVersion string
	// Entries, sorted by namespace then cluster name: one per lock
	// ConfigMap, one per Cluster whose lock name is taken by a ConfigMap
	// that is not its lock, and one per Cluster without any (free or
	// lost).
	Entries []Entry
}

// Reader is what Gather and Observe read with: an uncached client.
type Reader interface {
	client.Reader
}

var _ Reader = client.Client(nil)

type key struct{ namespace, name string }

// Gather reads every lock in scope. See the package documentation for the
// calls it makes. Each cluster is then inspected by keeper.Inspect, as the
// manager inspects it, from a snapshot of what was listed.
func Gather(ctx context.Context, c Reader, opts Options) (*Inventory, error) {
	if opts.CAPIVersion == "" {
		return nil, fmt.Errorf("listing init locks: no Cluster API version given: discover the one the API server serves (capi.Discover)")
	}
	if opts.PageSize == 0 {
		opts.PageSize = DefaultPageSize
	}
	snap := &snapshot{locks: map[key]*corev1.ConfigMap{}}
	var err error
	if snap.clusters, err = listClusters(ctx, c, opts); err != nil {
		return nil, err
	}
	locks, err := listLabelledLocks(ctx, c, opts)
	if err != nil {
		return nil, err
	}
	// Clusters whose lock is not among the labelled ConfigMaps: their lock
	// name may be taken by a ConfigMap that is not their lock.
	var unmatched []key
	for k := range snap.clusters {
		if _, ok := locks[k]; ok {
			continue
		}
		if _, err := initlock.LockName(k.name); err != nil {
			continue // no ConfigMap can be this cluster's lock
		}
		unmatched = append(unmatched, k)
	}
	if len(unmatched) > 0 {
		foreign, err := findForeign(ctx, c, opts, unmatched)
		if err != nil {
			return nil, err
		}
		for k, cm := range foreign {
			locks[k] = cm
		}
	}
	if snap.machines, err = listMachines(ctx, c, opts); err != nil {
		return nil, err
	}
	clusters := map[key]bool{}
	for k, cm := range locks {
		snap.locks[key{k.namespace, cm.Name}] = cm
		clusters[k] = true
	}
	for k := range snap.clusters {
		clusters[k] = true
	}
	inv := &Inventory{CAPIVersion: opts.CAPIVersion}
	for k := range clusters {
		cl, selected := snap.clusters[k]
		if opts.ClusterSelector != nil && !selected {
			continue // the lock of a Cluster not selected, or of none
		}
		e, err := observe(ctx, snap, keeper.Query{Namespace: k.namespace, Cluster: k.name, CAPIVersion: opts.CAPIVersion, Policy: opts.Policy, Now: opts.Now})
		if err != nil {
			return nil, err
		}
		if selected {
			e.ClusterLabels = cl.GetLabels()
		}
		inv.Entries = append(inv.Entries, e)
	}
	sort.Slice(inv.Entries, func(i, j int) bool {
		a, b := inv.Entries[i], inv.Entries[j]
		if a.Namespace != b.Namespace {
			return a.Namespace < b.Namespace
		}
		return a.ClusterName < b.ClusterName
	})
	return inv, nil
}

func listClusters(ctx context.Context, c Reader, opts Options) (map[key]*unstructured.Unstructured, error) {
	out := map[key]*unstructured.Unstructured{}
	gvk := capi.ClusterGVK(opts.CAPIVersion)
	list := &unstructured.UnstructuredList{}
	list.SetGroupVersionKind(gvk.GroupVersion().WithKind(gvk.Kind + "List"))
	var extra []client.ListOption
	if opts.ClusterSelector != nil {
		extra = append(extra, client.MatchingLabelsSelector{Selector: opts.ClusterSelector})
	}
	err := paginate(ctx, c, list, opts, func() error {
		for i := range list.Items {
			u := list.Items[i].DeepCopy()
			u.SetGroupVersionKind(gvk)
			out[key{u.GetNamespace(), u.GetName()}] = u
		}
		return nil
	}, extra...)
	if err != nil {
		return nil, ListError(err, "clusters", capi.Group, opts.Namespace)
	}
	return out, nil
}
func listLabelledLocks(ctx context.Context, c Reader, opts Options) (map[key]*corev1.ConfigMap, error) {
	out := map[key]*corev1.ConfigMap{}
	list := &corev1.ConfigMapList{}
	err := paginate(ctx, c, list, opts, func() error {
		for i := range list.Items {
			cm := &list.Items[i]
			cluster := cm.Labels[capi.ClusterNameLabel]
			if name, err := initlock.LockName(cluster); err != nil || name != cm.Name {
				continue // labelled for a cluster, but not named as its lock
			}
			out[key{cm.Namespace, cluster}] = cm.DeepCopy()
		}
		return nil
	}, client.HasLabels{capi.ClusterNameLabel})
	if err != nil {
		return nil, ListError(err, "configmaps", "", opts.Namespace)
	}
	return out, nil
}

// findForeign finds, among the clusters given, those whose lock name is
// taken by a ConfigMap, with a metadata-only list, and reads each such
// ConfigMap in full.
func findForeign(ctx context.Context, c Reader, opts Options, clusters []key) (map[key]*corev1.ConfigMap, error) {
	wanted := map[key]key{} // lock -> cluster
	for _, k := range clusters {
		name, _ := initlock.LockName(k.name)
		wanted[key{k.namespace, name}] = k
	}
	var found []key
	list := &metav1.PartialObjectMetadataList{}
	list.SetGroupVersionKind(corev1.SchemeGroupVersion.WithKind("ConfigMapList"))
	err := paginate(ctx, c, list, opts, func() error {
		for i := range list.Items {
			if _, ok := wanted[key{list.Items[i].Namespace, list.Items[i].Name}]; ok {
				found = append(found, key{list.Items[i].Namespace, list.Items[i].Name})
			}
		}
		return nil
	})
	if err != nil {
		return nil, ListError(err, "configmaps", "", opts.Namespace)
	}
	out := map[key]*corev1.ConfigMap{}
	for _, lk := range found {
		cm := &corev1.ConfigMap{}
		err := c.Get(ctx, client.ObjectKey{Namespace: lk.namespace, Name: lk.name}, cm)
		if apierrors.IsNotFound(err) {
			continue
		}
		if err != nil {
			return nil, GetError(err, "configmap", "configmaps", "", lk.namespace, lk.name)
		}
		out[wanted[lk]] = cm
	}
	return out, nil
}

func listMachines(ctx context.Context, c Reader, opts Options) (map[key]*metav1.PartialObjectMetadata, error) {
	out := map[key]*metav1.PartialObjectMetadata{}
	gvk := capi.MachineGVK(opts.CAPIVersion)
	list := &metav1.PartialObjectMetadataList{}
	list.SetGroupVersionKind(gvk.GroupVersion().WithKind(gvk.Kind + "List"))
	err := paginate(ctx, c, list, opts, func() error {
		for i := range list.Items {
			m := list.Items[i].DeepCopy()
			m.SetGroupVersionKind(gvk)
			out[key{m.Namespace, m.Name}] = m
		}
		return nil
	})
	if err != nil {
		return nil, ListError(err, "machines", capi.Group, opts.Namespace)
	}
	return out, nil
}

// paginate lists obj page by page, calling each after every page.
func paginate(ctx context.Context, c Reader, obj client.ObjectList, opts Options, each func() error, extra ...client.ListOption) error {
	listOpts := append([]client.ListOption{client.Limit(opts.PageSize)}, extra...)
	if opts.Namespace != "" {
		listOpts = append(listOpts, client.InNamespace(opts.Namespace))
	}
	cont := ""
	for {
		page := listOpts
		if cont != "" {
			page = append(append([]client.ListOption(nil), listOpts...), client.Continue(cont))
		}
		if err := c.List(ctx, obj, page...); err != nil {
			return err
		}
		if err := each(); err != nil {
			return err
		}
		cont = obj.GetContinue()
		if cont == "" {
			return nil
		}
	}
}
