package demo

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"
	"time"

	riav2 "github.com/vmware-tanzu/velero/pkg/plugin/velero/restoreitemaction/v2"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/initlock/initlock/internal/kubeenv"
	"github.com/initlock/initlock/internal/kubeenv/velerosim"
	"github.com/initlock/initlock/internal/kubeenv/wire"
	"github.com/initlock/initlock/internal/relink"
	"github.com/initlock/initlock/internal/velero"
	"github.com/initlock/initlock/pkg/initlock/capi"
)

// The object graph of the relink part.
const (
	graphNamespace = "demo-graph"
	graphCluster   = "graph"
)

// graphKinds are the kinds of the graph.
var graphKinds = []schema.GroupVersionKind{
	corev1.SchemeGroupVersion.WithKind("ConfigMap"),
	corev1.SchemeGroupVersion.WithKind("Secret"),
	capi.MachineGVK(capi.V1Beta2),
	capi.ClusterGVK(capi.V1Beta2).GroupVersion().WithKind("MachineSet"),
	capi.ClusterGVK(capi.V1Beta2).GroupVersion().WithKind("MachineDeployment"),
	capi.ClusterGVK(capi.V1Beta2),
}

// objectGraph: a Cluster with a MachineDeployment, its MachineSet and
// Machine, a kubeconfig Secret and a held lock goes through a backup and a
// restore with initlock's Velero plugin; the relinker links every object to
// its owner again, and deleting the Cluster deletes the whole graph.
func (d *demo) objectGraph() {
	tl := d.tl
	tl.chapter("Object graph", "The whole Cluster API object graph is relinked after a restore",
		"initlock's Velero plugin records each restored object's owners with their backed-up UIDs; the relinker, running",
		"in the manager's process, links them to the owners the same restore brought back, by their new UIDs, so the garbage collector works again.")
	var (
		backup []*unstructured.Unstructured
		owned  map[string]string // object -> owner, as created
	)

	tl.step("Create Cluster "+graphCluster+" with a MachineDeployment, MachineSet, Machines, a Secret and a held lock", func(n note) error {
		var err error
		if owned, err = d.createGraph(n); err != nil {
			return err
		}
		n("%d objects with ownerReferences: %s", len(owned), strings.Join(sortedKeys(owned), ", "))
		return nil
	})

	tl.step("Back up namespace "+graphNamespace+", delete it and wait until it is gone", func(n note) error {
		var err error
		if backup, err = velerosim.Backup(d.ctx, d.c, graphNamespace, graphKinds...); err != nil {
			return err
		}
		n("backed up %d objects", len(backup))
		return d.deleteNamespace(graphNamespace)
	})

	var restored time.Time
	tl.step("Restore with initlock's Velero plugin: owners recorded in "+relink.Annotation, func(n note) error {
		if err := d.createNamespace(graphNamespace); err != nil {
			return err
		}
		d.lockWrites.take()
		count, sample, err := d.restoreWithPlugin(backup)
		if err != nil {
			return err
		}
		restored = time.Now()
		n("restored %d objects without ownerReferences, Clusters last; the plugin recorded for example", count)
		n("%s", sample)
		return nil
	})

	tl.step("The relinker links every object to its owner's new UID", func(n note) error {
		var lines []string
		err := poll(d.ctx, d.opts.Timeout, func(context.Context) error {
			var err error
			lines, err = d.graphLinked(owned)
			return err
		})
		if err != nil {
			return err
		}
		n("all %d objects linked %s after the restore, annotations removed:", len(lines), duration(time.Since(restored)))
		for _, l := range lines {
			n("  %s", l)
		}
		_, writes := d.lockWrites.take()
		n("the lock controller and the relinker both act on the lock; optimistic concurrency makes the one")
		n("that loses retry on the newer version (initlock-manager's writes to ConfigMaps: %s)", writes)
		return nil
	})

	tl.step("Delete Cluster "+graphCluster+": the whole graph goes with it", func(n note) error {
		cluster, err := d.getCluster(graphNamespace, graphCluster)
		if err != nil {
			return err
		}
		if cluster == nil {
			return fmt.Errorf("cluster %s/%s is gone", graphNamespace, graphCluster)
		}
		if err := d.c.Delete(d.ctx, cluster, client.PropagationPolicy(metav1.DeletePropagationForeground)); err != nil {
			return fmt.Errorf("deleting cluster %s/%s: %w", graphNamespace, graphCluster, err)
		}
		started := time.Now()
		// Cluster API deletes a Cluster's control plane, and its Machines,
		// before the Cluster; nothing here runs its controllers.
		cp := &unstructured.Unstructured{}
		cp.SetGroupVersionKind(capi.MachineGVK(capi.V1Beta2))
		cp.SetNamespace(graphNamespace)
		cp.SetName(graphCluster + "-cp-0")
		if err := client.IgnoreNotFound(d.c.Delete(d.ctx, cp)); err != nil {
			return fmt.Errorf("deleting machine %s/%s: %w", graphNamespace, cp.GetName(), err)
		}
		n("Machine %s, the lock's holder, deleted as Cluster API deletes a Cluster's Machines before the Cluster", cp.GetName())
		err = poll(d.ctx, d.opts.Timeout, func(ctx context.Context) error {
			left, err := d.remaining(ctx, owned)
			if err != nil {
				return err
			}
			if len(left) > 0 {
				return fmt.Errorf("still there: %s", strings.Join(left, ", "))
			}
			return nil
		})
		if err != nil {
			return err
		}
		n("the %d owned objects were deleted %s after the Cluster: the lock by initlock-manager once its holder Machine was gone (the lock guard refuses the garbage collector's delete), the rest by the garbage collector", len(owned), duration(time.Since(started)))
		return nil
	})
}

// graphObject is one object of the graph and its owner.
type graphObject struct {
	obj   *unstructured.Unstructured
	owner *unstructured.Unstructured
	// controller marks the owner as the controller.
	controller bool
}

// createGraph creates the graph, each owner before its dependents, and
// returns "Kind/name" -> "OwnerKind/name".
func (d *demo) createGraph(n note) (map[string]string, error) {
	if err := d.createNamespace(graphNamespace); err != nil {
		return nil, err
	}
	ns, v := graphNamespace, d.capiVersion
	cluster := kubeenv.NewCluster(v, ns, graphCluster)
	md := kubeenv.NewMachineGroup("MachineDeployment", v, ns, graphCluster, graphCluster+"-md-0")
	ms := kubeenv.NewMachineGroup("MachineSet", v, ns, graphCluster, graphCluster+"-md-0-7f9c")
	worker := kubeenv.NewMachine(v, ns, graphCluster, graphCluster+"-md-0-7f9c-x2k4")
	worker.SetLabels(map[string]string{capi.ClusterNameLabel: graphCluster, "pool": ms.GetName()})
	cp := kubeenv.NewMachine(v, ns, graphCluster, graphCluster+"-cp-0")
	secret := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "v1", "kind": "Secret",
		"metadata":   map[string]any{"namespace": ns, "name": graphCluster + "-kubeconfig", "labels": map[string]any{capi.ClusterNameLabel: graphCluster}},
		"stringData": map[string]any{"value": "a kubeconfig for the workload cluster"},
	}}

	if _, err := d.create(cluster); err != nil {
		return nil, err
	}
	graph := []graphObject{
		{obj: md, owner: cluster},
		{obj: ms, owner: md, controller: true},
		{obj: worker, owner: ms, controller: true},
		{obj: secret, owner: cluster, controller: true},
	}
	out := map[string]string{}
	for _, g := range graph {
		g.obj.SetOwnerReferences([]metav1.OwnerReference{{
			APIVersion: g.owner.GetAPIVersion(), Kind: g.owner.GetKind(), Name: g.owner.GetName(), UID: g.owner.GetUID(),
			Controller: ptr.To(g.controller), BlockOwnerDeletion: ptr.To(g.controller),
		}})
		if _, err := d.create(g.obj); err != nil {
			return nil, err
		}
		out[label(g.obj)] = label(g.owner)
	}
	if _, err := d.create(cp); err != nil {
		return nil, err
	}
	if err := d.takeLock(n, cluster, cp); err != nil {
		return nil, err
	}
	out["ConfigMap/"+graphCluster+wire.LockSuffix] = label(cluster)
	return out, nil
}

func label(u *unstructured.Unstructured) string { return u.GetKind() + "/" + u.GetName() }

func sortedKeys(m map[string]string) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// restoreWithPlugin restores the objects as Velero does, with the project's
// simulator of it (velerosim), running initlock's restore item actions on
// the items they apply to, as Velero's resolver decides.
func (d *demo) restoreWithPlugin(objs []*unstructured.Unstructured) (int, string, error) {
	cfg := velero.DefaultConfig()
	r, err := velerosim.New(d.env.Config, velerosim.Options{
		BackupName: "demo-graph-backup", RestoreName: "demo-graph-restore",
		Actions: []riav2.RestoreItemAction{velero.NewAction(cfg, false, nil), velero.NewAction(cfg, true, nil)},
	})
	if err != nil {
		return 0, "", err
	}
	restored, err := r.Restore(d.ctx, objs)
	if err != nil {
		return len(restored), "", err
	}
	sample := ""
	for _, u := range restored {
		if u.GetKind() == "MachineSet" {
			sample = fmt.Sprintf("%s: %s=%s", label(u), relink.Annotation, u.GetAnnotations()[relink.Annotation])
		}
	}
	return len(restored), sample, nil
}

// graphLinked checks that each object of owned points at its owner's current
// UID and carries no annotation any more, and describes each link.
func (d *demo) graphLinked(owned map[string]string) ([]string, error) {
	var lines []string
	for _, obj := range sortedKeys(owned) {
		u, err := d.getByLabel(obj)
		if err != nil {
			return nil, err
		}
		owner, err := d.getByLabel(owned[obj])
		if err != nil {
			return nil, err
		}
		if u == nil || owner == nil {
			return nil, fmt.Errorf("%s or its owner %s does not exist", obj, owned[obj])
		}
		linked := false
		for _, r := range u.GetOwnerReferences() {
			if r.Kind == owner.GetKind() && r.Name == owner.GetName() && r.UID == owner.GetUID() {
				linked = true
			}
		}
		if !linked {
			return nil, fmt.Errorf("%s is not linked to %s uid %s yet", obj, owned[obj], short(owner.GetUID()))
		}
		if _, ok := u.GetAnnotations()[relink.Annotation]; ok {
			return nil, fmt.Errorf("%s still carries %s", obj, relink.Annotation)
		}
		lines = append(lines, fmt.Sprintf("%-40s -> %s uid %s", obj, owned[obj], short(owner.GetUID())))
	}
	return lines, nil
}

// remaining returns the objects of owned that still exist.
func (d *demo) remaining(ctx context.Context, owned map[string]string) ([]string, error) {
	var left []string
	for _, obj := range sortedKeys(owned) {
		u, err := d.getByLabel(obj)
		if err != nil {
			return nil, err
		}
		if u != nil {
			left = append(left, obj)
		}
	}
	return left, ctx.Err()
}

// getByLabel reads "Kind/name" from the graph's namespace; nil when absent.
func (d *demo) getByLabel(l string) (*unstructured.Unstructured, error) {
	kind, name, ok := strings.Cut(l, "/")
	if !ok {
		return nil, errors.New("bad object label " + l)
	}
	u := &unstructured.Unstructured{}
	apiVersion := capi.Group + "/" + d.capiVersion
	if kind == "ConfigMap" || kind == "Secret" {
		apiVersion = "v1"
	}
	u.SetAPIVersion(apiVersion)
	u.SetKind(kind)
	err := d.c.Get(d.ctx, types.NamespacedName{Namespace: graphNamespace, Name: name}, u)
	if apierrors.IsNotFound(err) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("reading %s %s/%s: %w", kind, graphNamespace, name, err)
	}
	return u, nil
}
