package keeper

import (
	"fmt"
	"time"

	"k8s.io/apimachinery/pkg/types"

	"github.com/initlock/initlock/pkg/initlock/internal/engine"
)

// memo is what the Keeper remembers about one Cluster between Keeps. It is
// an optimisation and a spam filter only: losing it (a restart) costs at
// most one read, one repeated warning or a longer orphan grace, never a
// wrong write.
type memo struct {
	// writtenFrom is the lock (UID and resourceVersion; any version of
	// that UID once it was deleted) the last write was made from; while
	// the cache still shows it, the write is not visible yet and deciding
	// again would repeat it.
	writtenFrom objectVersion
	// orphanUID and orphanSince: since when this lock has been seen
	// without its Cluster.
	orphanUID   types.UID
	orphanSince time.Time
	// warned is the last warning emitted: reason and object version.
	warned string
	// checked is the Cluster UID and generation for which a live read
	// found no ConfigMap with the lock's name.
	checked string
	// conflict is the pair of Machines whose conflict was reported.
	conflict string
}

type objectVersion struct {
	uid             types.UID
	resourceVersion string
}

// anyVersion, as a resourceVersion, stands for every version of a lock the
// Keeper deleted: a release writes the release mark, then deletes, and
// the cache may show the marked version before the deletion.
const anyVersion = "*"

// shows tells whether the cache's lock cm is the version v stands for.
func (v objectVersion) shows(uid types.UID, resourceVersion string) bool {
	return v.uid == uid && (v.resourceVersion == resourceVersion || v.resourceVersion == anyVersion)
}

// memoFor returns the memo of a Cluster, creating it.
func (k *Keeper) memoFor(key types.NamespacedName) *memo {
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.memos == nil {
		k.memos = map[types.NamespacedName]*memo{}
	}
	m, ok := k.memos[key]
	if !ok {
		m = &memo{}
		k.memos[key] = m
	}
	return m
}

func (k *Keeper) forget(key types.NamespacedName) {
	k.mu.Lock()
	defer k.mu.Unlock()
	delete(k.memos, key)
}

// needsLiveCheck tells whether to look for an unlabelled ConfigMap with the
// lock's name: only for a Cluster whose lock still matters (it exists, is
// not deleting and not initialised), once per UID and generation.
func (m *memo) needsLiveCheck(cl *engine.Cluster) bool {
	if cl == nil || cl.Deleting || cl.Initialized {
		return false
	}
	return m.checked != checkKey(cl)
}

func checkKey(cl *engine.Cluster) string {
	return fmt.Sprintf("%s/%d", cl.UID, cl.Generation)
}

// noteAbsence gives the observation since when this Keeper has seen the
// lock without its Cluster (engine.Observation.AbsentSince), and forgets it
// once the Cluster is seen again.
func (k *Keeper) noteAbsence(m *memo, obs *engine.Observation) {
	if obs.Cluster != nil || obs.Lock == nil || obs.Lock.Problem != nil {
		m.orphanUID, m.orphanSince = "", time.Time{}
		return
	}
	if m.orphanUID != obs.Lock.UID {
		m.orphanUID, m.orphanSince = obs.Lock.UID, k.now()
	}
	since := m.orphanSince
	obs.AbsentSince = &since
}
