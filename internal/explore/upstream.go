package explore

import (
	"context"
	"encoding/json"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"

	"github.com/initlock/initlock/internal/kubeenv"
	"github.com/initlock/initlock/internal/kubeenv/apimodel"
)

// upstreamLock is CABPK v1.14's ControlPlaneInitMutex.Lock, request for
// request: it reads the lock through the provider's cache; when it exists,
// a record naming this Machine means acquired, and a record naming a
// Machine the cache does not show makes it delete the lock (Unlock) and
// answer not acquired; when it does not exist, it creates the lock (live),
// and is acquired if the create succeeds.
func (s *System) upstreamLock(ctx context.Context, actor, machine string) bool {
	c := viewClient{Client: s.client(actor), sys: s}
	cm := &corev1.ConfigMap{}
	err := c.Get(ctx, types.NamespacedName{Namespace: namespace, Name: lockName}, cm)
	switch {
	case apierrors.IsNotFound(err):
	case err != nil:
		return false
	default:
		var info struct {
			MachineName string `json:"machineName"`
		}
		if json.Unmarshal([]byte(cm.Data["lock-information"]), &info) != nil {
			return false
		}
		if info.MachineName == machine {
			return true
		}
		holder := &metav1.PartialObjectMetadata{}
		holder.SetGroupVersionKind(apimodel.MachineGVK)
		if err := c.Get(ctx, types.NamespacedName{Namespace: namespace, Name: info.MachineName}, holder); apierrors.IsNotFound(err) {
			s.upstreamUnlock(ctx, actor)
		}
		return false
	}
	var owner *unstructured.Unstructured
	if cl := s.view(actor, clusterKey); cl != nil {
		owner = &unstructured.Unstructured{Object: cl}
	}
	return s.client(actor).Create(ctx, kubeenv.NewLock(namespace, clusterName, machine, owner)) == nil
}

// upstreamUnlock is CABPK v1.14's ControlPlaneInitMutex.Unlock: it reads the
// lock through the provider's cache and deletes it, live, with no
// precondition.
func (s *System) upstreamUnlock(ctx context.Context, actor string) {
	c := viewClient{Client: s.client(actor), sys: s}
	cm := &corev1.ConfigMap{}
	if err := c.Get(ctx, types.NamespacedName{Namespace: namespace, Name: lockName}, cm); err != nil {
		return
	}
	_ = s.client(actor).Delete(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: lockName}})
}

// upstreamProvider is a bootstrap provider that runs CABPK's own mutex for
// one Machine: it asks for the lock on each attempt and, granted it, runs
// init, which goes on or fails (then it unlocks, as CABPK does when it
// cannot generate the init data, and tries again).
func (s *System) upstreamProvider(ctx context.Context, p Provider) {
	machine, actor := p.Machine, p.actor()
	defer s.actorDone(actor)
	for i := range p.Attempts {
		if s.isAborted() {
			return
		}
		s.forget(actor, fmt.Sprintf("attempt %d", i))
		s.wait(actor, "reconcile")
		m := s.view(actor, machineKey(machine))
		if m == nil {
			continue
		}
		uid := typesUID(m["metadata"].(map[string]any)["uid"])
		s.checker.callStarted(s, actor)
		s.checker.calls[actor].upstream = true
		s.touch(hookCallStarted)
		acquired := s.upstreamLock(ctx, actor, machine)
		if s.isAborted() {
			return
		}
		s.checker.upstreamReturned(s, actor, machine, uid, acquired)
		if !acquired {
			continue
		}
		s.touch(hookGranted)
		ways := []string{wayGoesOn}
		if p.Unlock {
			ways = []string{wayInitFails, wayGoesOn}
		}
		if ways[s.branch(actor, "init", ways...)] == wayGoesOn {
			return
		}
		s.checker.unlocking(machine, uid)
		s.touch(hookUnlocking)
		s.upstreamUnlock(ctx, actor)
	}
}

// upstreamReturned judges an upstream provider's Lock, as lockReturned
// judges initlock's: nothing but the ConfigMap protects its grant.
func (c *checker) upstreamReturned(s *System, actor, machine string, uid types.UID, acquired bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	cl := c.calls[actor]
	delete(c.calls, actor)
	if !acquired {
		return
	}
	if c.granted(machine, uid, " by its upstream provider") {
		return
	}
	live := c.liveIncarnation(s, machine, uid)
	if s.initialisedLocked() || live == "" || cl == nil || cl.lostLock {
		return
	}
	c.grants = append(c.grants, grant{machine: machine, uid: live, upstream: true, lock: true})
}
