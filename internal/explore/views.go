package explore

import (
	"context"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/initlock/initlock/internal/kubeenv/apimodel"
)

// view reads k from actor's cache: the scheduler picks the version.
func (s *System) view(actor string, k apimodel.Key) map[string]any {
	if s.isAborted() {
		return nil
	}
	p := &pending{view: &viewRead{actor: actor, key: k}, done: make(chan struct{})}
	s.gate.add(p)
	<-p.done
	if p.view.chosen.Object == nil {
		return nil
	}
	return runtime.DeepCopyJSON(p.view.chosen.Object)
}

// viewVersions are the versions a cache read may show: those not older
// than what the actor saw last, at most the scenario's View Depth back.
func (s *System) viewVersions(v *viewRead) []apimodel.Version {
	h := s.store.History(v.key)
	if len(h) == 0 {
		return []apimodel.Version{{}}
	}
	floor := s.floors[v.actor][v.key]
	var out []apimodel.Version
	for _, ver := range h {
		if ver.RV >= floor {
			out = append(out, ver)
		}
	}
	n := s.sc.viewDepth(v.actor) + 1
	if s.budget.stale <= 0 {
		n = 1
	}
	if len(out) > n {
		out = out[len(out)-n:]
	}
	return out
}

func (s *System) seen(actor string, k apimodel.Key, rv int64) {
	if s.floors[actor] == nil {
		s.floors[actor] = map[apimodel.Key]int64{}
	}
	if rv > s.floors[actor][k] {
		s.floors[actor][k] = rv
	}
}

// viewClient reads through an actor's cache and writes live: a manager's
// client.
type viewClient struct {
	*apimodel.Client
	sys *System
}

func (c viewClient) Get(_ context.Context, key client.ObjectKey, obj client.Object, _ ...client.GetOption) error {
	kind := obj.GetObjectKind().GroupVersionKind().Kind
	if _, ok := obj.(*corev1.ConfigMap); ok {
		kind = "ConfigMap"
	}
	k := apimodel.Key{Kind: kind, Namespace: key.Namespace, Name: key.Name}
	v := c.sys.view(c.Actor, k)
	if v == nil {
		return apierrors.NewNotFound(gr(kind), key.Name)
	}
	return apimodel.Fill(obj, v)
}

func (s *System) maxViewDepth() int {
	d := s.sc.ManagerViewDepth
	for _, p := range s.sc.Providers {
		d = max(d, p.ViewDepth)
	}
	return d
}
