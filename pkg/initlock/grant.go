package initlock

import (
	"encoding/json"
	"time"
)

// GrantAnnotation on a Machine records that the Machine was granted its
// cluster's init lock. It travels with the Machine through backup, restore
// and move, and it goes when the Machine is deleted. Its value is JSON:
// {"cluster":"<cluster name>","acquiredAt":"<RFC 3339>"}.
const GrantAnnotation = AnnotationPrefix + "init-lock-grant"

// Grant is the grant record a Machine carries.
type Grant struct {
	// Cluster is the name of the Cluster whose lock was granted.
	Cluster string `json:"cluster"`
	// AcquiredAt is when the grant was recorded; nil when unknown.
	AcquiredAt *time.Time `json:"acquiredAt,omitempty"`
}

// For tells whether the grant is for the named cluster. A grant whose value
// could not be parsed (Cluster empty) counts for every cluster.
func (g *Grant) For(cluster string) bool {
	return g != nil && (g.Cluster == "" || g.Cluster == cluster)
}

func grantFrom(annotations map[string]string) *Grant {
	v, ok := annotations[GrantAnnotation]
	if !ok {
		return nil
	}
	g := &Grant{}
	if err := json.Unmarshal([]byte(v), g); err != nil {
		return &Grant{}
	}
	return g
}

func (g Grant) encode() string {
	b, err := json.Marshal(g)
	if err != nil { // a string and a time cannot fail to marshal
		panic(err)
	}
	return string(b)
}
