package demo

import (
	"errors"
	"fmt"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/initlock/initlock/internal/kubeenv"
	"github.com/initlock/initlock/pkg/initlock/capi"
)

// The objects of the single-node scenario.
const (
	soloNamespace = "demo-single-node"
	soloCluster   = "solo"
	soloMachine   = "solo-cp-0"
)

// singleNode: the only control-plane Machine of a Cluster takes the lock,
// the control plane is initialised, and the manager releases the lock.
func (d *demo) singleNode() {
	tl := d.tl
	tl.chapter("Single-node cluster", "A single-node cluster: the lock is released once the control plane is initialised",
		"Upstream releases the lock only when another control-plane Machine joins, so a cluster with one",
		"control-plane Machine keeps it for as long as the Cluster exists.")
	var cluster, machine *unstructured.Unstructured

	tl.step("Create Cluster "+soloCluster+" and its only control-plane Machine "+soloMachine+"; it takes the init lock", func(n note) error {
		if err := d.createNamespace(soloNamespace); err != nil {
			return err
		}
		var err error
		if cluster, err = d.create(kubeenv.NewCluster(d.capiVersion, soloNamespace, soloCluster)); err != nil {
			return err
		}
		if machine, err = d.create(kubeenv.NewMachine(d.capiVersion, soloNamespace, soloCluster, soloMachine)); err != nil {
			return err
		}
		return d.takeLock(n, cluster, machine)
	})

	var initialised time.Time
	tl.step("The control plane is initialised (Cluster status, through the status subresource)", func(n note) error {
		d.lockWrites.take()
		u, err := d.getCluster(soloNamespace, soloCluster)
		if err != nil {
			return err
		}
		if u == nil {
			return fmt.Errorf("cluster %s/%s is gone", soloNamespace, soloCluster)
		}
		if err := kubeenv.SetInitialized(d.ctx, d.c, u); err != nil {
			return err
		}
		initialised = time.Now()
		if !capi.IsControlPlaneInitialized(u) {
			return errors.New("the status written does not read as initialised")
		}
		n("status.initialization.controlPlaneInitialized: true, condition %s: True", kubeenv.InitializedCondition)
		return nil
	})

	tl.step("initlock-manager releases the lock", func(n note) error {
		if err := d.waitLockGone(soloNamespace, soloCluster); err != nil {
			return err
		}
		took := time.Since(initialised)
		_, writes := d.lockWrites.take()
		n("released %s after the status change; initlock-manager's writes: %s (UID and resourceVersion preconditions)", duration(took), writes)
		ev, err := d.event(soloNamespace, "LockReleased", "Cluster", soloCluster)
		if err != nil {
			return err
		}
		n("event %s on Cluster %s: %s", ev.Reason, soloCluster, ev.Note)
		return nil
	})
}
