package clisuite

import (
	"maps"
	"testing"
	"time"

	"github.com/initlock/initlock/internal/cli/inventory"
	"github.com/initlock/initlock/internal/kubeenv"
	"github.com/initlock/initlock/internal/kubeenv/wire"
	"github.com/initlock/initlock/pkg/initlock/keeper"
)

// Gather runs inventory.Gather, one object a page, on a namespace of b with
// a healthy lock, the lock of an initialised Cluster, a foreign ConfigMap
// and a ConfigMap labelled for a Cluster but not named as its lock: it
// finds each Cluster's lock with its verdict and writes nothing; Observe
// reads one Cluster's lock and holder in b's Cluster API version.
func Gather(t *testing.T, b *Backend) {
	ctx := t.Context()
	ns := b.Namespace(t)
	b.held(t, ns, "c-healthy", false)
	initialised := b.newCluster(t, ns, "c-init", true)
	b.newLock(t, ns, "c-init", "m-gone", initialised)
	b.newCluster(t, ns, "c-foreign", false)
	b.newConfigMap(t, ns, "c-foreign-lock", nil, nil, nil)
	// Labelled for a cluster but not named as its lock: not a lock.
	b.newConfigMap(t, ns, "c-healthy-settings", map[string]string{wire.ClusterNameLabel: "c-healthy"}, nil, nil)

	var c kubeenv.Counter
	cl, err := b.counting(&c)
	if err != nil {
		t.Fatal(err)
	}
	// A page size of 1 makes every list take several pages.
	inv, err := inventory.Gather(ctx, cl, inventory.Options{Namespace: ns, CAPIVersion: b.CAPIVersion, PageSize: 1,
		Policy: keeper.DefaultPolicy(), Now: time.Now()})
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]string{}
	for _, e := range inv.Entries {
		got[e.ClusterName] = e.Status.Verdict
	}
	want := map[string]string{
		"c-foreign": "foreign",
		"c-healthy": "healthy",
		"c-init":    "held-after-init",
	}
	if !maps.Equal(got, want) {
		t.Errorf("entries %v, want %v", got, want)
	}
	expectN(t, "writes of Gather", c.Writes(), 0)

	e, err := inventory.Observe(ctx, cl, keeper.Query{Namespace: ns, Cluster: "c-healthy", CAPIVersion: b.CAPIVersion})
	if err != nil {
		t.Fatal(err)
	}
	// The holder is read in b.CAPIVersion: in another, it would not be found.
	if !e.Status.HolderExists || e.Status.RecordHolder == "" || e.ConfigMap == nil {
		t.Errorf("Observe: %+v", e.Status)
	}
}
