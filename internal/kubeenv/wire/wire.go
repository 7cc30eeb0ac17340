package wire

import (
	"encoding/json"
	"errors"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
)

// The lock, as Cluster API's kubeadm bootstrap provider writes it.
const (
	// LockSuffix follows the Cluster's name in its lock's name.
	LockSuffix = "-lock"
	// DataKey holds the lock's record.
	DataKey = "lock-information"
	// ClusterNameLabel names the lock's Cluster.
	ClusterNameLabel = "cluster.x-k8s.io/cluster-name"
)

// The annotations initlock writes.
const (
	// GrantAnnotation on a Cluster is its grant register (Grant).
	GrantAnnotation = "initlock.dev/init-lock-grant"
	// ReleaseAnnotation on a lock is its release mark: the lock's UID.
	ReleaseAnnotation = "initlock.dev/releasable"
	// ReleaseStartedAnnotation is when the release that marked the lock
	// began (RFC 3339).
	ReleaseStartedAnnotation = "initlock.dev/release-started"
	// ClusterAbsentAnnotation on a lock is "<RFC 3339 time> <lock UID>":
	// since when its Cluster was found missing.
	ClusterAbsentAnnotation = "initlock.dev/cluster-absent-since"
	// MoveAnnotation is clusterctl move's mark on what it is deleting.
	MoveAnnotation = "clusterctl.cluster.x-k8s.io/delete-for-move"
)

// ReleaseMarkGrace is how long after the release-started stamp a keeper
// leaves a release mark to the release that wrote it (docs/design.md,
// section 1); it takes an older one off.
const ReleaseMarkGrace = 30 * time.Second

// ErrNoMachine is returned for a record that names no machine.
var ErrNoMachine = errors.New("record names no machine")

// Ref is how a record or a grant names its Machine: by name, and, as
// initlock writes them, by the Machine's and the Cluster's UIDs too.
type Ref struct {
	MachineName string    `json:"machineName"`
	MachineUID  types.UID `json:"machineUID,omitempty"`
	ClusterUID  types.UID `json:"clusterUID,omitempty"`
}

// Names tells whether r names the Machine called name, of UID uid, of a
// Cluster whose UID is now clusterUID: by name, and by UID too while the
// Cluster has the UID r was written under (a restore or a move gives the
// Cluster and its Machines new UIDs, and a record keeps naming its Machine
// by name after it). A UID unknown on either side does not count.
func (r Ref) Names(clusterUID types.UID, name string, uid types.UID) bool {
	if r.MachineName == "" || r.MachineName != name {
		return false
	}
	if r.MachineUID == "" || uid == "" || r.ClusterUID == "" || r.ClusterUID != clusterUID {
		return true
	}
	return r.MachineUID == uid
}

// Record is the JSON under DataKey. Upstream writes MachineName alone.
type Record struct {
	Ref
	Token        string     `json:"token,omitempty"`
	AcquiredAt   *time.Time `json:"acquiredAt,omitempty"`
	HandedOverBy string     `json:"handedOverBy,omitempty"`
}

// DecodeRecord reads a record; it fails on data that is not a JSON object
// and, wrapping ErrNoMachine, on one that names no machine.
func DecodeRecord(data string) (Record, error) {
	var r Record
	if err := json.Unmarshal([]byte(data), &r); err != nil {
		return Record{}, fmt.Errorf("decoding %s %q: %w", DataKey, data, err)
	}
	if r.MachineName == "" {
		return Record{}, fmt.Errorf("decoding %s %q: %w", DataKey, data, ErrNoMachine)
	}
	return r, nil
}

// Encode returns r as the JSON under DataKey.
func (r Record) Encode() string {
	b, err := json.Marshal(r)
	if err != nil { // strings and a time always marshal
		panic(err)
	}
	return string(b)
}

// Grant is the value of a Cluster's grant register: a Machine's grant, or,
// naming no Machine, the release of the last one.
type Grant struct {
	Ref
	Token      string     `json:"token,omitempty"`
	AcquiredAt *time.Time `json:"acquiredAt,omitempty"`
	ReleasedAt *time.Time `json:"releasedAt,omitempty"`

	raw string
}

// GrantFrom reads the grant register from a Cluster's annotations: nil when
// there is none, a Grant naming no Machine and carrying no token when its
// value is not a JSON object.
func GrantFrom(annotations map[string]string) *Grant {
	v, ok := annotations[GrantAnnotation]
	if !ok {
		return nil
	}
	g := &Grant{}
	if err := json.Unmarshal([]byte(v), g); err != nil {
		g = &Grant{}
	}
	g.raw = v
	return g
}

// Held tells that the register names a Machine.
func (g *Grant) Held() bool { return g != nil && g.MachineName != "" }

// Released tells that the register records a release.
func (g *Grant) Released() bool { return g != nil && g.MachineName == "" && g.Token != "" }

// Raw is the annotation's value as read; empty when there is none.
func (g *Grant) Raw() string {
	if g == nil {
		return ""
	}
	return g.raw
}

// Lock is what a ConfigMap says as a Cluster's lock.
type Lock struct {
	UID types.UID
	// Record is the lock's record; its zero value when Err is set.
	Record Record
	// Err says why the ConfigMap is not a lock of the Cluster (it lacks
	// the Cluster's label or DataKey), or why its record cannot be read;
	// nil for a lock.
	Err error
	// Releasable: it carries its own release mark (ReleaseAnnotation with
	// its UID).
	Releasable bool
	// MoveMark: it carries MoveAnnotation.
	MoveMark bool
	// Deleting: it has a deletion timestamp.
	Deleting bool
}

// LockOf reads ConfigMap cm as the lock of the Cluster named cluster.
func LockOf(cm *corev1.ConfigMap, cluster string) Lock {
	l := Lock{UID: cm.UID, Deleting: cm.DeletionTimestamp != nil}
	l.Releasable = cm.Annotations[ReleaseAnnotation] == string(cm.UID) && cm.UID != ""
	_, l.MoveMark = cm.Annotations[MoveAnnotation]
	data, ok := cm.Data[DataKey]
	switch {
	case cm.Labels[ClusterNameLabel] != cluster || !ok:
		l.Err = fmt.Errorf("configmap %s/%s is not the lock of cluster %s: it needs label %s=%s and key %s", cm.Namespace, cm.Name, cluster, ClusterNameLabel, cluster, DataKey)
	default:
		l.Record, l.Err = DecodeRecord(data)
	}
	return l
}
