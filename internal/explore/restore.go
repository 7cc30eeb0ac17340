package explore

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"strings"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"

	velerov1 "github.com/vmware-tanzu/velero/pkg/apis/velero/v1"

	"github.com/initlock/initlock/internal/kubeenv/apimodel"
	"github.com/initlock/initlock/internal/kubeenv/velerosim"
	"github.com/initlock/initlock/internal/kubeenv/wire"
)

// backup is a backup of the namespace: every object as it stood when it was
// taken.
type backup struct {
	items  []*unstructured.Unstructured
	digest string
}

// withEscapedRecord is a copy of the backup whose lock's record names its
// Machine under the key machine\u004eame, as a restore's resource modifier
// may write it: the same record to every JSON decoder.
func (b *backup) withEscapedRecord() *backup {
	out := &backup{digest: b.digest + "+escaped"}
	for _, it := range b.items {
		it = it.DeepCopy()
		if it.GetKind() == "ConfigMap" && it.GetName() == clusterName+wire.LockSuffix {
			if rec, ok, _ := unstructured.NestedString(it.Object, "data", wire.DataKey); ok {
				_ = unstructured.SetNestedField(it.Object, strings.Replace(rec, `"machineName"`, `"machine\u004eame"`, 1), "data", wire.DataKey)
			}
		}
		out.items = append(out.items, it)
	}
	return out
}

// takeBackup copies every object of the namespace, as Velero backs it up:
// but for the objects being deleted, which Velero skips
// (velerosim.Backup does the same, checked against Velero).
func (s *System) takeBackup() *backup {
	b := &backup{}
	h := sha256.New()
	for _, k := range s.store.Keys() {
		obj, err := s.store.Get(k)
		if err != nil {
			continue
		}
		if meta, _ := obj["metadata"].(map[string]any); meta["deletionTimestamp"] != nil {
			continue // Velero backs up no object that is being deleted
		}
		u := &unstructured.Unstructured{Object: obj}
		u.SetGroupVersionKind(gvkOf(k.Kind))
		b.items = append(b.items, u)
		js, _ := json.Marshal(obj)
		fmt.Fprintf(h, "%s %s\n", k, js)
	}
	b.digest = hex.EncodeToString(h.Sum(nil)[:12])
	return b
}

func gvkOf(kind string) schema.GroupVersionKind {
	switch kind {
	case "Cluster":
		return apimodel.ClusterGVK
	case "Machine":
		return apimodel.MachineGVK
	}
	return schema.GroupVersionKind{Version: "v1", Kind: kind}
}

// restoreBackup deletes every object of the namespace and creates the
// backed-up ones again as Velero restores them (velerosim): in Velero's
// order, with new UIDs, without ownerReferences and status. It happens in
// one step of the exploration: a request sees the namespace either before
// or after it.
func (s *System) restoreBackup(b *backup) {
	before := s.machineUIDs()
	s.purge()
	s.restoreItems(b.items)
	s.checker.restored(s, before)
}

// restoreUpdate restores the backup over the live objects with Velero's
// update policy (velerosim): the objects that exist keep their UIDs and are
// patched towards the backup; a Machine or a lock gone since is created
// again.
func (s *System) restoreUpdate(b *backup) {
	before := s.machineUIDs()
	s.restoreItemsWith(b.items, velerov1.PolicyTypeUpdate)
	s.checker.restored(s, before)
}

// restoreMachine deletes Machine name and restores it alone from the
// backup: a new UID, while everything else stays as it is.
func (s *System) restoreMachine(b *backup, name string) {
	before := map[string]types.UID{name: s.snapshot().machines[name].UID}
	s.store.Purge(machineKey(name))
	for _, it := range b.items {
		if it.GetKind() == "Machine" && it.GetName() == name {
			s.restoreItems([]*unstructured.Unstructured{it})
		}
	}
	s.checker.restored(s, before)
}

// restoreClusterFirst restores the backup but its Machines, which
// restoreMachines brings back later: a restore that brings the Cluster and
// the lock back before the Machines (a copy applied in file order, a
// restore with its own resource order, a partial restore completed later).
func (s *System) restoreClusterFirst(b *backup) {
	s.pendingBefore = s.machineUIDs()
	s.purge()
	s.restoreLeavingMachines(b)
}

// restoreOverLock deletes the Cluster and its Machines, not the lock (the
// lock guard keeps it), and restores the backup but its Machines, as
// restoreClusterFirst does: the restore leaves the existing lock as it is.
func (s *System) restoreOverLock(b *backup) {
	s.pendingBefore = s.machineUIDs()
	for _, k := range s.store.Keys() {
		if k.Kind == "Cluster" || k.Kind == "Machine" {
			s.store.Purge(k)
		}
	}
	s.restoreLeavingMachines(b)
}

// restoreLeavingMachines restores the backup's items but its Machines,
// which it keeps for restoreMachines, and but what exists, which it leaves
// as it is, as Velero does.
func (s *System) restoreLeavingMachines(b *backup) {
	var rest []*unstructured.Unstructured
	s.pending = nil
	for _, it := range b.items {
		switch {
		case it.GetKind() == "Machine":
			s.pending = append(s.pending, it)
		case s.store.Peek(apimodel.Key{Kind: it.GetKind(), Namespace: it.GetNamespace(), Name: it.GetName()}) == nil:
			rest = append(rest, it)
		}
	}
	s.restoreItems(rest)
}

// restoreMachines brings back the Machines restoreClusterFirst or
// restoreOverLock left out.
func (s *System) restoreMachines() {
	s.restoreItems(s.pending)
	s.pending = nil
	s.checker.restored(s, s.pendingBefore)
}

func (s *System) machineUIDs() map[string]types.UID {
	before := map[string]types.UID{}
	for name, m := range s.snapshot().machines {
		before[name] = m.UID
	}
	return before
}

// purge deletes the namespace: no admission, no finalizer holds.
func (s *System) purge() {
	for _, k := range s.store.Keys() {
		s.store.Purge(k)
	}
}

// restoreItems restores copies of items as Velero does (velerosim), leaving
// what exists as it is.
func (s *System) restoreItems(its []*unstructured.Unstructured) {
	s.restoreItemsWith(its, velerov1.PolicyTypeNone)
}

// restoreItemsWith restores copies of items as Velero does with
// --existing-resource-policy=policy.
func (s *System) restoreItemsWith(its []*unstructured.Unstructured, policy velerov1.PolicyType) {
	items := make([]*unstructured.Unstructured, len(its))
	for i, it := range its {
		items[i] = it.DeepCopy()
	}
	r := velerosim.NewForClient(&apimodel.Client{Store: s.store, Actor: "velero"}, velerosim.Options{ExistingResourcePolicy: policy})
	if _, err := r.Restore(context.Background(), items); err != nil {
		panic(fmt.Sprintf("explore: restoring the backup: %v", err))
	}
}

// pendingMachine is the backup's object of Machine name while a restore
// has yet to bring it back; nil otherwise.
func (s *System) pendingMachine(name string) *machineState {
	for _, it := range s.pending {
		if it.GetName() == name {
			return &machineState{UID: it.GetUID()}
		}
	}
	return nil
}

// restored follows the grants through a restore. A restored Machine is the
// same Machine under a new UID: its grant goes on (the Machine may be
// running init), and it is protected by what the restore brought back of
// the register and the lock. A grant neither of which came back was lost
// with the backup's age (a backup older than the grant), a limit
// pkg/initlock documents: it is no longer checked. A Machine the backup
// did not hold is gone, and so is its grant. Calls in flight may have lost
// whatever they wrote since the backup.
func (c *checker) restored(s *System, before map[string]types.UID) {
	sn := s.snapshot()
	if c.prev == nil {
		c.prev = map[types.UID]types.UID{}
	}
	for name, old := range before {
		if m := sn.machines[name]; m != nil {
			c.prev[m.UID] = old
		}
	}
	kept := c.grants[:0]
	for _, g := range c.grants {
		m := sn.machines[g.machine]
		if m == nil {
			continue
		}
		g.uid = m.UID
		g.register = g.register && c.registerNames(sn, g.machine, m.UID)
		g.lock = g.lock && c.lockNames(sn, g.machine, m.UID)
		if !g.lock && s.sc.upstreamProviders() {
			// A backup older than the lock brings back no lock: stock
			// providers read nothing else, so in a fleet that mixes them
			// with initlock's library the register protects the grant
			// from initlock's callers alone (the limit docs/design.md
			// states).
			continue
		}
		if g.register || g.lock {
			kept = append(kept, g)
		}
	}
	c.grants = kept
	for _, cl := range c.calls {
		cl.lostRegister, cl.lostLock = true, true
	}
}

// sameMachine tells whether uid is cur or an earlier incarnation of it that
// a restore replaced: the same Machine.
func (c *checker) sameMachine(cur, uid types.UID) bool {
	for x := cur; x != ""; x = c.prev[x] {
		if x == uid {
			return true
		}
	}
	return false
}

// liveIncarnation is the live UID of the Machine uid is an incarnation of
// (itself, or what a restore made of it), or "" when it is gone.
func (c *checker) liveIncarnation(s *System, name string, uid types.UID) types.UID {
	m := s.snapshot().machines[name]
	if m == nil || !c.sameMachine(m.UID, uid) {
		return ""
	}
	return m.UID
}
