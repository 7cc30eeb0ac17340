package engine

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/validation"

	"github.com/initlock/initlock/pkg/initlock/capi"
	"github.com/initlock/initlock/pkg/initlock/internal/report"
)

const (
	// LockSuffix is appended to a cluster's name to name its lock.
	LockSuffix = "-lock"
	// DataKey is the ConfigMap data key that holds the lock record.
	DataKey = "lock-information"
	// ClusterNameLabel labels the lock with its cluster's name.
	ClusterNameLabel = capi.ClusterNameLabel
	// AnnotationPrefix prefixes every annotation initlock writes.
	AnnotationPrefix = "initlock.dev/"
	// ClusterAbsentAnnotation on a lock records since when its Cluster has
	// been missing, and for which incarnation of the lock (by UID), so that
	// an orphan's grace period survives restarts of the manager but not a
	// restore or a move, which give the lock a new UID.
	ClusterAbsentAnnotation = AnnotationPrefix + "cluster-absent-since"
)

// Ref is how a record names the Machine it grants the lock to. Records
// written by initlock carry the Machine's and the Cluster's UIDs, so that
// only the holder's own incarnation relies on them (Names); upstream
// records carry the name only. Whom a record keeps out is decided by name
// (Claims).
type Ref struct {
	// MachineName is the Machine.
	MachineName string `json:"machineName"`
	// MachineUID is the Machine's UID when the record was written.
	MachineUID types.UID `json:"machineUID,omitempty"`
	// ClusterUID is the Cluster's UID when the record was written. While
	// the Cluster keeps it, the record names its Machine by UID; after a
	// restore or a move (a new Cluster UID, and new Machine UIDs) it names
	// its Machine by name.
	ClusterUID types.UID `json:"clusterUID,omitempty"`
}

// Names tells whether the record names Machine m of Cluster cl: by name
// and, while cl has the UID the record was written under, by UID too. A
// record without UIDs (an upstream one) names its Machine by name.
func (r Ref) Names(cl *Cluster, m *Machine) bool {
	if m == nil || r.MachineName == "" || r.MachineName != m.Name {
		return false
	}
	if r.MachineUID == "" || m.UID == "" || cl == nil || r.ClusterUID == "" || r.ClusterUID != cl.UID {
		return true
	}
	return r.MachineUID == m.UID
}

// Claims tells whether the record keeps Machine m's place against every
// other Machine: m exists under the name the record gives, whatever its
// UID. Names decides who may rely on a record; Claims decides whom it keeps
// out. A Machine of the holder's name under another UID, while the Cluster
// keeps the UID the record was written under, is either the holder
// restored alone (a partial restore gives it a new UID and brings its
// bootstrap data, init data perhaps, back with it) or a Machine created
// anew under its name. Nothing a decision reads tells the two apart, so
// the record keeps out everyone else while such a Machine exists; that
// Machine's own Lock takes the lock over.
func (r Ref) Claims(m *Machine) bool {
	return m != nil && r.MachineName != "" && r.MachineName == m.Name
}

// Exact tells whether the record names Machine m of Cluster cl by both
// UIDs: it was written for these incarnations of the Cluster and the
// Machine. Only such a record is relied on without writing it again.
func (r Ref) Exact(cl *Cluster, m *Machine) bool {
	return m != nil && cl != nil && r.MachineName == m.Name &&
		r.MachineUID != "" && r.MachineUID == m.UID && r.ClusterUID != "" && r.ClusterUID == cl.UID
}

// Record is the JSON held under DataKey. MachineName is the only field the
// upstream providers write or read; the others are written by initlock and
// ignored by upstream decoders.
type Record struct {
	Ref
	// Token is unique to the acquisition that wrote the record; the grant
	// register carries the same token while that acquisition stands. A
	// record without a token (upstream, or written for another Machine) is
	// never relied on without writing it again.
	Token string `json:"token,omitempty"`
	// AcquiredAt is when the current holder acquired the lock.
	AcquiredAt *time.Time `json:"acquiredAt,omitempty"`
	// HandedOverBy names the Machine whose Lock call wrote this record for
	// the holder named in the Cluster's grant register (the lock had been
	// lost or written by a refused caller).
	HandedOverBy string `json:"handedOverBy,omitempty"`
}

// Encode returns the JSON for lock-information.
func (r Record) Encode() string {
	b, err := json.Marshal(r)
	if err != nil { // a struct of strings and a time cannot fail to marshal
		panic(err)
	}
	return string(b)
}

// LockName returns the name of cluster's lock, or an error wrapping
// initlock.ErrInvalidName when no valid lock can carry that cluster's name: the lock
// name must be a DNS subdomain of at most 253 characters, and the cluster name
// a label value of at most 63 characters.
func LockName(cluster string) (string, error) {
	if cluster == "" {
		return "", fmt.Errorf("%w: cluster name is empty", report.ErrInvalidName)
	}
	name := cluster + LockSuffix
	if errs := validation.IsDNS1123Subdomain(name); len(errs) > 0 {
		return "", fmt.Errorf("%w: lock name %q for cluster %q: %s", report.ErrInvalidName, truncate(name), truncate(cluster), errs[0])
	}
	if errs := validation.IsValidLabelValue(cluster); len(errs) > 0 {
		return "", fmt.Errorf("%w: cluster name %q cannot be the value of label %s: %s", report.ErrInvalidName, truncate(cluster), ClusterNameLabel, errs[0])
	}
	return name, nil
}

func truncate(s string) string {
	if len(s) > 80 {
		return s[:77] + "..."
	}
	return s
}

// classify tells whether cm is clusterName's lock, returning its record, or
// an error wrapping initlock.ErrNotALock or initlock.ErrCorruptLock that says why not.
func classify(cm *corev1.ConfigMap, clusterName string) (Record, error) {
	label, ok := cm.Labels[ClusterNameLabel]
	if !ok {
		return Record{}, fmt.Errorf("%w (no %s label)", report.ErrNotALock, ClusterNameLabel)
	}
	if label != clusterName {
		return Record{}, fmt.Errorf("%w (label %s is %q, not %q)", report.ErrNotALock, ClusterNameLabel, label, clusterName)
	}
	data, ok := cm.Data[DataKey]
	if !ok {
		return Record{}, fmt.Errorf("%w (no %s key)", report.ErrNotALock, DataKey)
	}
	return DecodeRecord(data)
}

// DecodeRecord parses lock-information. It fails, wrapping initlock.ErrCorruptLock,
// when the data is not a JSON object or names no machine: an empty name, or one
// that no Machine can have (not a DNS subdomain, as the API server requires
// of every Machine's). A JSON object without a machineName field at all (in
// any case of its letters, as Go's decoders match it) is another provider's
// lock of the same name, such as KubeKey's {"kkInstanceName":…}: it fails
// wrapping initlock.ErrNotALock and errOtherProvider (OtherProvidersLock),
// and is left to the provider that wrote it, as the lock guard leaves it.
// Unknown fields are ignored, as upstream decoders ignore initlock's.
func DecodeRecord(data string) (Record, error) {
	var fields map[string]json.RawMessage
	if err := json.Unmarshal([]byte(data), &fields); err != nil {
		return Record{}, fmt.Errorf("%w: %s is not a JSON lock record: %w", report.ErrCorruptLock, DataKey, err)
	}
	if fields == nil {
		return Record{}, fmt.Errorf("%w: %s is not a JSON lock record: null", report.ErrCorruptLock, DataKey)
	}
	if !hasMachineName(fields) {
		return Record{}, fmt.Errorf("%w: %s has no machineName field: %w", report.ErrNotALock, DataKey, errOtherProvider)
	}
	var r Record
	if err := json.Unmarshal([]byte(data), &r); err != nil {
		return Record{}, fmt.Errorf("%w: %s is not a JSON lock record: %w", report.ErrCorruptLock, DataKey, err)
	}
	if r.MachineName == "" {
		return Record{}, fmt.Errorf("%w: %s names no machine (empty machineName)", report.ErrCorruptLock, DataKey)
	}
	if errs := validation.IsDNS1123Subdomain(r.MachineName); len(errs) > 0 {
		return Record{}, fmt.Errorf("%w: %s names no machine (machineName %q is not a Machine's name: %s)", report.ErrCorruptLock, DataKey, r.MachineName, strings.Join(errs, "; "))
	}
	return r, nil
}

func hasMachineName(fields map[string]json.RawMessage) bool {
	for k := range fields {
		if strings.EqualFold(k, "machineName") {
			return true
		}
	}
	return false
}

// errOtherProvider marks a ConfigMap of the lock's name, label and data
// key whose record has no machineName: another provider's lock.
var errOtherProvider = errors.New("another provider's lock (KubeKey's, say), left to the provider that wrote it")

// OtherProvidersLock tells whether err says that the ConfigMap is another
// provider's lock of the same name (DecodeRecord).
func OtherProvidersLock(err error) bool { return errors.Is(err, errOtherProvider) }
