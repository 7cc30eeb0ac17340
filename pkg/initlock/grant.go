package initlock

import (
	"encoding/json"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/types"
)

// GrantAnnotation on a Cluster is the cluster's grant register: it names
// the Machine that was granted the cluster's init lock. It is written with
// a compare-and-swap (a JSON patch that tests the value read), so that at
// most one Machine is ever named in it, and it travels with the Cluster
// through backup, restore and move. Its value is JSON:
// {"machineName":"<machine>","machineUID":"<uid>","clusterUID":"<uid>",
// "acquiredAt":"<RFC 3339>"}.
const GrantAnnotation = AnnotationPrefix + "init-lock-grant"

// Grant is the content of a Cluster's grant register.
type Grant struct {
	// MachineName is the Machine the lock was granted to. The grant counts
	// while that Machine exists (see Names).
	MachineName string `json:"machineName"`
	// MachineUID is the holder's UID when the grant was recorded.
	MachineUID types.UID `json:"machineUID,omitempty"`
	// ClusterUID is the Cluster's UID when the grant was recorded. While
	// the Cluster keeps it, the grant names its Machine by UID too, so that
	// a Machine created again under the holder's name does not inherit it;
	// after a restore or a move (a new Cluster UID, and new Machine UIDs)
	// it names its Machine by name.
	ClusterUID types.UID `json:"clusterUID,omitempty"`
	// AcquiredAt is when the grant was recorded.
	AcquiredAt *time.Time `json:"acquiredAt,omitempty"`

	// raw is the annotation's value as read: writes test against it.
	raw string
}

// Damaged tells that the register holds a value that is not a grant record.
// A damaged register protects the lock like a grant of an unknown Machine:
// Lock refuses every caller (ErrCorruptLock) until an operator releases it.
func (g *Grant) Damaged() bool { return g != nil && g.MachineName == "" }

// Names tells whether the grant is for Machine m of Cluster cl: by name and,
// while the Cluster has the UID recorded, by the Machine's UID too.
func (g *Grant) Names(cl Cluster, m Machine) bool {
	if g == nil || g.Damaged() || g.MachineName != m.Name {
		return false
	}
	return g.ClusterUID == "" || g.ClusterUID != cl.UID || g.MachineUID == "" || m.UID == "" || g.MachineUID == m.UID
}

// GrantFrom reads the grant register from a Cluster's annotations; nil when
// the register is empty.
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

func (g Grant) encode() string {
	b, err := json.Marshal(g)
	if err != nil { // strings and a time cannot fail to marshal
		panic(err)
	}
	return string(b)
}

// grantPointer is the JSON pointer of the register in a Cluster.
var grantPointer = "/metadata/annotations/" + strings.NewReplacer("~", "~0", "/", "~1").Replace(GrantAnnotation)

// claimPatch is the JSON patch that writes value into the register if, and
// only if, the register still holds prev (nil: empty). hasAnnotations tells
// whether the Cluster had annotations when read: a JSON patch cannot add a
// key to a map that does not exist, nor test a key in it. Should the
// Cluster have changed in that respect, the test fails and nothing is
// written.
func claimPatch(prev *Grant, hasAnnotations bool, value string) []byte {
	var ops []map[string]any
	switch {
	case prev != nil:
		ops = []map[string]any{
			{"op": "test", "path": grantPointer, "value": prev.raw},
			{"op": "replace", "path": grantPointer, "value": value},
		}
	case hasAnnotations:
		ops = []map[string]any{
			{"op": "test", "path": grantPointer, "value": nil},
			{"op": "add", "path": grantPointer, "value": value},
		}
	default:
		ops = []map[string]any{
			{"op": "test", "path": "/metadata/annotations", "value": nil},
			{"op": "add", "path": "/metadata/annotations", "value": map[string]string{GrantAnnotation: value}},
		}
	}
	return mustJSON(ops)
}

// withdrawPatch is the JSON patch that empties the register if, and only
// if, it still holds value.
func withdrawPatch(value string) []byte {
	return mustJSON([]map[string]any{
		{"op": "test", "path": grantPointer, "value": value},
		{"op": "remove", "path": grantPointer},
	})
}

func mustJSON(v any) []byte {
	b, err := json.Marshal(v)
	if err != nil { // maps of strings cannot fail to marshal
		panic(err)
	}
	return b
}
