package chaos

import (
	"context"
	"fmt"
	"slices"
	"sort"
	"time"

	velerov1 "github.com/vmware-tanzu/velero/pkg/apis/velero/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/initlock/initlock/pkg/initlock/capi"
)

// addOnSuffix ends the name of a Cluster's add-on ConfigMap: a user's
// object owned by the Cluster, which no Cluster API controller adopts.
const addOnSuffix = "-addons"

// newAddOn is the add-on ConfigMap of cluster.
func newAddOn(ns string, cluster *unstructured.Unstructured) *corev1.ConfigMap {
	return &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: cluster.GetName() + addOnSuffix,
		Labels: map[string]string{capi.ClusterNameLabel: cluster.GetName()},
		OwnerReferences: []metav1.OwnerReference{{APIVersion: cluster.GetAPIVersion(), Kind: "Cluster",
			Name: cluster.GetName(), UID: cluster.GetUID()}}},
		Data: map[string]string{"addons": "cni"}}
}

// relinkState is what invariant 5 knows: the restore that created each
// restored Cluster and add-on, by UID, each add-on's backed-up owner, and
// every Cluster reference the watcher saw on an add-on.
type relinkState struct {
	clusterRestore map[types.UID]string
	addOns         map[types.UID]restoredAddOn
	links          []addOnLink
}

type restoredAddOn struct {
	restore string
	// backedUp is the UID of the Cluster the add-on was backed up with.
	backedUp types.UID
}

type addOnLink struct {
	name         string
	addOn, owner types.UID
	rv           int64
	at           time.Duration
}

// ClusterRestored records a Cluster that restore created.
func (c *Checker) ClusterRestored(uid types.UID, restore string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.relinks.clusterRestore[uid] = restore
}

// AddOnRestored records an add-on that restore created, backed up with
// the Cluster of UID backedUp.
func (c *Checker) AddOnRestored(uid types.UID, restore string, backedUp types.UID) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.relinks.addOns[uid] = restoredAddOn{restore: restore, backedUp: backedUp}
}

// observeAddOn records the Cluster references of an add-on event; the
// caller holds c.mu.
func (c *Checker) observeAddOn(o Observed) {
	for _, owner := range o.OwnerUIDs {
		c.relinks.links = append(c.relinks.links, addOnLink{name: o.Name, addOn: o.UID, owner: owner, rv: o.RV, at: o.Seen})
	}
}

// CheckRelinks judges every Cluster reference seen on a restored add-on
// (invariant 5), once the runner has recorded every restore.
func (c *Checker) CheckRelinks() {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, l := range c.relinks.links {
		a, restored := c.relinks.addOns[l.addOn]
		if !restored {
			continue // made at setup, or a naive copy: the relinker never writes it
		}
		if l.owner == a.backedUp || (a.restore != "" && c.relinks.clusterRestore[l.owner] == a.restore) {
			c.counts.AddOnLinks++
			continue
		}
		why := "no restore created"
		if r, ok := c.relinks.clusterRestore[l.owner]; ok {
			why = "restore " + r + " created"
		}
		c.violate(InvRightOwner, "add-on %s (uid %s), restored by %s, was linked at %.3fs (rv %d) to Cluster uid %s, which %s",
			l.name, shortUID(string(l.addOn)), a.restore, l.at.Seconds(), l.rv, shortUID(string(l.owner)), why)
	}
}

// unlinkedAddOns lists the restored add-ons whose restore's Cluster exists,
// and is not being deleted, that are not linked to it.
func (r *runner) unlinkedAddOns(ctx context.Context) ([]string, error) {
	cms := &corev1.ConfigMapList{}
	if err := r.admin.List(ctx, cms, client.InNamespace(r.ns)); err != nil {
		return nil, err
	}
	var out []string
	for _, cm := range cms.Items {
		cluster, restore := cm.Labels[capi.ClusterNameLabel], cm.Labels[velerov1.RestoreNameLabel]
		if cluster == "" || cm.Name != cluster+addOnSuffix || restore == "" {
			continue
		}
		u := r.clusterObject(cluster)
		if err := r.admin.Get(ctx, client.ObjectKeyFromObject(u), u); err != nil {
			if client.IgnoreNotFound(err) != nil {
				return nil, err
			}
			continue
		}
		if u.GetDeletionTimestamp() != nil || u.GetLabels()[velerov1.RestoreNameLabel] != restore {
			continue
		}
		if !slices.ContainsFunc(cm.OwnerReferences, func(ref metav1.OwnerReference) bool { return ref.UID == u.GetUID() }) {
			out = append(out, fmt.Sprintf("add-on %s (rv %s), restored by %s, is not linked to Cluster %s (uid %s) restored with it",
				cm.Name, cm.ResourceVersion, restore, cluster, shortUID(string(u.GetUID()))))
		}
	}
	sort.Strings(out)
	return out, nil
}
