package engine

import (
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"strings"
	"time"

	"github.com/initlock/initlock/pkg/initlock/capi"
)

// GrantAnnotation on a Cluster is the cluster's grant register: it names
// the Machine that was granted the cluster's init lock, or records that the
// last grant was released. Every write to it is a compare-and-swap (a JSON
// patch that tests the exact value read), and every value written is unique
// (it carries a fresh token), so that a write the API server applies late,
// or twice, fails once the register has moved on. It travels with the
// Cluster through backup, restore and move. Its value is JSON: a grant
// {"machineName","machineUID","clusterUID","token","acquiredAt"}, or, once
// released, {"machineName":"","token","releasedAt"}.
const GrantAnnotation = AnnotationPrefix + "init-lock-grant"

// Grant is the content of a Cluster's grant register.
type Grant struct {
	Ref
	// Token is unique to the write that recorded this value. While the
	// grant stands, the lock's record carries the same token.
	Token string `json:"token,omitempty"`
	// AcquiredAt is when the grant was recorded.
	AcquiredAt *time.Time `json:"acquiredAt,omitempty"`
	// ReleasedAt, on a value that names no Machine, is when the last grant
	// was released: the register is empty.
	ReleasedAt *time.Time `json:"releasedAt,omitempty"`

	// raw is the annotation's value as read: writes test against it.
	raw string
}

// Damaged tells that the register holds a value that is neither a grant nor
// a release. A damaged register protects the lock like a grant of an
// unknown Machine: Lock refuses every caller (initlock.ErrCorruptLock) until an
// operator releases it.
func (g *Grant) Damaged() bool { return g != nil && g.MachineName == "" && g.Token == "" }

// Released tells that the register records a release: it names no Machine.
func (g *Grant) Released() bool { return g != nil && g.MachineName == "" && g.Token != "" }

// Held tells that the register names a Machine.
func (g *Grant) Held() bool { return g != nil && g.MachineName != "" }

// Raw is the annotation's value as read.
func (g *Grant) Raw() string {
	if g == nil {
		return ""
	}
	return g.raw
}

// GrantFrom reads the grant register from a Cluster's annotations; nil when
// the annotation is absent.
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
	if err != nil { // strings and times cannot fail to marshal
		panic(err)
	}
	return string(b)
}

// newToken returns 128 random bits in hex.
func newToken() string {
	var b [16]byte
	if _, err := rand.Read(b[:]); err != nil { // crypto/rand does not fail on Linux
		panic(err)
	}
	return hex.EncodeToString(b[:])
}

var (
	annotationsPointer = "/metadata/annotations"
	grantPointer       = annotationsPointer + "/" + jsonPointer(GrantAnnotation)
	pausedPointer      = annotationsPointer + "/" + jsonPointer(capi.PausedAnnotation)
)

// registerPatch is the JSON patch that writes value into cl's grant
// register if, and only if, the Cluster is still the one read (its UID),
// is not paused, and its register still holds exactly what was read
// (cl.Grant, nil: absent). Should anything of that have changed, a test
// fails, the API server answers 422 Invalid and writes nothing.
//
// A JSON patch can neither test nor add a key of a map that does not
// exist: a Cluster read without annotations gets a patch that tests that
// it still has none and adds the map.
func registerPatch(cl Cluster, value string) []byte {
	ops := []map[string]any{{"op": "test", "path": "/metadata/uid", "value": string(cl.UID)}}
	switch cl.pausedSpec {
	case specMissing:
		ops = append(ops, map[string]any{"op": "test", "path": "/spec", "value": nil})
	case specPausedFalse:
		ops = append(ops, map[string]any{"op": "test", "path": "/spec/paused", "value": false})
	default:
		ops = append(ops, map[string]any{"op": "test", "path": "/spec/paused", "value": nil})
	}
	if !cl.HasAnnotations {
		return mustJSON(append(ops,
			map[string]any{"op": "test", "path": annotationsPointer, "value": nil},
			map[string]any{"op": "add", "path": annotationsPointer, "value": map[string]string{GrantAnnotation: value}}))
	}
	ops = append(ops, map[string]any{"op": "test", "path": pausedPointer, "value": nil})
	if cl.Grant == nil {
		return mustJSON(append(ops,
			map[string]any{"op": "test", "path": grantPointer, "value": nil},
			map[string]any{"op": "add", "path": grantPointer, "value": value}))
	}
	return mustJSON(append(ops,
		map[string]any{"op": "test", "path": grantPointer, "value": cl.Grant.raw},
		map[string]any{"op": "replace", "path": grantPointer, "value": value}))
}

func mustJSON(v any) []byte {
	b, err := json.Marshal(v)
	if err != nil { // maps of strings cannot fail to marshal
		panic(err)
	}
	return b
}

// jsonPointer escapes one key of a JSON pointer.
func jsonPointer(key string) string {
	return strings.NewReplacer("~", "~0", "/", "~1").Replace(key)
}
