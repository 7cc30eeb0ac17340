package managersuite_test

import (
	"errors"
	"fmt"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/initlock/initlock/internal/kubeenv"
)

// TestLeaderElection: of two replicas with leader election, exactly one
// reconciles and writes; when it stops, the other takes over.
func TestLeaderElection(t *testing.T) {
	ns := env.Namespace(t)
	opts := testOptions(ns)
	opts.LeaderElection = true
	opts.LeaderElectionNamespace = ns
	opts.LeaderElectionID = "initlock-manager-test"
	opts.LeaseDuration, opts.RenewDeadline, opts.RetryPeriod = 4*time.Second, 3*time.Second, 200*time.Millisecond
	replicas := []*kubeenv.Running{startManager(t, env.Config, opts), startManager(t, env.Config, opts)}

	leader := func() (int, error) {
		var elected []int
		for i, rm := range replicas {
			select {
			case <-rm.Manager.Elected():
				elected = append(elected, i)
			default:
			}
		}
		if len(elected) != 1 {
			return -1, fmt.Errorf("replicas elected: %v, want exactly one", elected)
		}
		return elected[0], nil
	}
	var first int
	kubeenv.Eventually(t, 20*time.Second, func() (err error) {
		first, err = leader()
		return err
	})
	holder := leaseHolder(t, ns, opts.LeaderElectionID)
	if holder == "" {
		t.Fatalf("lease %s has no holder", opts.LeaderElectionID)
	}

	restoreLock := func(name string) {
		create(t, lockFor(ns, name, name+"-cp-0", nil))
		createMachine(t, v, ns, name, name+"-cp-0")
		kubeenv.Eventually(t, 20*time.Second, lockIs(t, ns, name, ownedBy(createCluster(t, v, ns, name))))
	}
	restoreLock("a")
	kubeenv.Consistently(t, 2*time.Second, func() error {
		if _, err := leader(); err != nil {
			return err
		}
		if h := leaseHolder(t, ns, opts.LeaderElectionID); h != holder {
			return fmt.Errorf("lease holder changed from %s to %s", holder, h)
		}
		return nil
	})
	follower := 1 - first
	wantWrites(t, replicas[first], "configmaps", ns, 1, "by the leader")
	wantWrites(t, replicas[follower], "configmaps", ns, 0, "by the follower")
	wantWrites(t, replicas[follower], "events", ns, 0, "by the follower")

	// The leader stops (and releases the Lease): the other takes over.
	replicas[first].Stop()
	kubeenv.Eventually(t, 20*time.Second, func() error {
		select {
		case <-replicas[follower].Manager.Elected():
		default:
			return errors.New("the remaining replica is not elected")
		}
		if h := leaseHolder(t, ns, opts.LeaderElectionID); h == holder || h == "" {
			return fmt.Errorf("lease holder is %q", h)
		}
		return nil
	})
	restoreLock("b")
	wantWrites(t, replicas[follower], "configmaps", ns, 1, "by the new leader")
}

func leaseHolder(t testing.TB, ns, name string) string {
	t.Helper()
	lease := &coordinationv1.Lease{}
	if err := env.Client.Get(t.Context(), types.NamespacedName{Namespace: ns, Name: name}, lease); err != nil {
		t.Fatalf("reading lease: %v", err)
	}
	if lease.Spec.HolderIdentity == nil {
		return ""
	}
	return *lease.Spec.HolderIdentity
}
