package explore

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"

	"github.com/initlock/initlock/internal/kubeenv/apimodel"
	"github.com/initlock/initlock/internal/kubeenv/velerosim"
)

// backup is a backup of the namespace: every object as it stood when it was
// taken.
type backup struct {
	items  []*unstructured.Unstructured
	digest string
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
	before := map[string]types.UID{}
	for name, m := range s.snapshot().machines {
		before[name] = m.UID
	}
	for _, k := range s.store.Keys() {
		s.store.Purge(k) // the namespace is deleted: no admission, no finalizer holds
	}
	items := make([]*unstructured.Unstructured, len(b.items))
	for i, it := range b.items {
		items[i] = it.DeepCopy()
	}
	r := velerosim.NewForClient(&apimodel.Client{Store: s.store, Actor: "velero"}, velerosim.Options{})
	if _, err := r.Restore(context.Background(), items); err != nil {
		panic(fmt.Sprintf("explore: restoring the backup: %v", err))
	}
	s.checker.restored(s, before)
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
		g.register = g.register && sn.registerNames(m)
		g.lock = g.lock && sn.lockNames(m)
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
