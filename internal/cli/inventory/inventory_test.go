package inventory_test

import (
	"testing"

	clisuite "github.com/initlock/initlock/test/cli"
)

// The inventory case of test/cli against the model API server (Cluster API
// v1beta2): no control plane. test/cli/inventory runs it against a real
// API server that serves v1beta1 only.
func TestGather(t *testing.T) {
	b, err := clisuite.Model()
	if err != nil {
		t.Fatal(err)
	}
	clisuite.Gather(t, b)
}
