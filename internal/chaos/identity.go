package chaos

import (
	"fmt"

	"k8s.io/apimachinery/pkg/types"

	"github.com/initlock/initlock/internal/kubeenv/wire"
)

// Incarnation names, by UID, the Cluster and the Machine objects a Lock
// call was made with. A Machine re-created under its name, or a Cluster
// restored, is another incarnation: a grant is to one Machine incarnation,
// in one Cluster incarnation.
type Incarnation struct {
	Cluster, Machine types.UID
}

// goneUID marks a Machine or Cluster the scenario deleted and has not
// created again.
const goneUID types.UID = "(gone)"

// MachineCreated records the UID of a Machine the scenario created.
func (c *Checker) MachineCreated(machine string, uid types.UID) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.machineUIDs[machine] = uid
}

// ClusterDeleting records that a Cluster is about to be deleted: no Lock
// call for it opens a hold until it is created again.
func (c *Checker) ClusterDeleting(cluster string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if _, ok := c.clusterUIDs[cluster]; ok {
		c.clusterUIDs[cluster] = goneUID
	}
}

// ClusterCreated records the UID of a Cluster the scenario created, or
// created again from a backup with the grant register grant (nil when the
// backup had none). The hold of the Cluster's previous incarnation goes on
// only if the restored register names its Machine: a restored Cluster has
// a new UID, and its register names its Machine by name. Otherwise it
// ends, as pkg/initlock documents: restoring a Cluster from a backup older
// than a grant removes the grant's protection.
func (c *Checker) ClusterCreated(cluster string, uid types.UID, grant *wire.Grant) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.clusterUIDs[cluster] = uid
	h := c.holds[cluster]
	if h == nil {
		return
	}
	if !h.upstream && grant.Held() && grant.MachineName == h.machine && !c.deleting[h.machine] {
		c.counts.HoldsKept++
		c.h.Add("check", "hold kept", h.machine, "", "the restored register of "+cluster+" names it")
		return
	}
	delete(c.holds, cluster)
	c.counts.HoldsEnded++
	c.h.Add("check", "hold ends", h.machine, "", "cluster "+cluster+" was restored from a backup whose register does not name it")
}

// gone tells why the objects of in are no longer the live ones of cluster
// and machine, or "" when they are (or the scenario did not record them).
// The caller holds c.mu.
func (c *Checker) gone(cluster, machine string, in Incarnation) string {
	if uid, ok := c.machineUIDs[machine]; ok && uid != in.Machine {
		return fmt.Sprintf("Lock was called with machine uid %s, the machine is now %s", shortUID(string(in.Machine)), shortUID(string(uid)))
	}
	if uid, ok := c.clusterUIDs[cluster]; ok && uid != in.Cluster {
		return fmt.Sprintf("Lock was called with cluster uid %s, the cluster is now %s", shortUID(string(in.Cluster)), shortUID(string(uid)))
	}
	return ""
}

// StaleView records a Lock or Unlock call made with the Cluster and the
// Machine at the given revisions, read from an informer cache.
func (c *Checker) StaleView(cluster string, clusterRV int64, machine string, machineRV int64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.counts.StaleViews++
	if clusterRV < c.latest[KindCluster][cluster] || machineRV < c.latest[KindMachine][machine] {
		c.counts.StaleBehind++
	}
}
