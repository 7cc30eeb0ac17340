// Command untyped is a bootstrap provider's use of initlock without the
// Cluster API Go types: the Locker and the drop-in mutex over unstructured
// objects. It is built, not run, by the consumer test.
package main

import (
	"context"
	"fmt"
	"os"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/initlock/initlock/pkg/initlock"
	"github.com/initlock/initlock/pkg/initlock/locking"
)

// initLocker is the interface a provider's reconciler holds the lock by.
type initLocker interface {
	Lock(ctx context.Context, cluster, machine *unstructured.Unstructured) bool
	Unlock(ctx context.Context, cluster *unstructured.Unstructured) bool
}

func main() {
	cfg, err := ctrl.GetConfig()
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	c, err := client.New(cfg, client.Options{})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	var lock initLocker = locking.NewControlPlaneInitMutex[*unstructured.Unstructured, *unstructured.Unstructured](c)
	locker := initlock.New(c, initlock.WithAPIReader(c))
	fmt.Println(lock != nil, locker != nil)
}
