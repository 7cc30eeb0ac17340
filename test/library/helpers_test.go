package library_test

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/initlock/initlock/internal/kubeenv"
	"github.com/initlock/initlock/internal/kubeenv/wire"
)

// grant reads the Cluster's grant register live.
func (f *fixture) grant() *wire.Grant {
	f.t.Helper()
	return wire.GrantFrom(f.get(f.cluster).GetAnnotations())
}

// expectGrant checks that the Cluster's grant register names machine, or
// names no one when machine is "".
func (f *fixture) expectGrant(t *testing.T, machine string) {
	t.Helper()
	g := f.grant()
	switch {
	case machine == "" && g.Held():
		t.Errorf("grant register = %s, want it to name no one", g.Raw())
	case machine != "" && (!g.Held() || g.MachineName != machine):
		t.Errorf("grant register = %s, want a grant to %s", g.Raw(), machine)
	}
}

// expectHeld checks that the register and the lock name machine with one
// token: the lock stands for it, protected twice.
func (f *fixture) expectHeld(t *testing.T, machine string) {
	t.Helper()
	g := f.grant()
	cm := kubeenv.MustGetLock(f.t, f.admin, f.ns, "c1")
	if cm == nil {
		t.Fatalf("no lock, want one held by %s", machine)
	}
	r, err := wire.DecodeRecord(cm.Data[wire.DataKey])
	if err != nil {
		t.Fatal(err)
	}
	if !g.Held() || g.MachineName != machine || r.MachineName != machine || g.Token == "" || g.Token != r.Token {
		t.Errorf("register %s and lock %+v do not both name %s with one token", g.Raw(), r, machine)
	}
}

func (f *fixture) foreign(data, labels map[string]string) {
	f.t.Helper()
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: f.ns, Name: "c1-lock", Labels: labels}, Data: data}
	if err := f.admin.Create(f.ctx(), cm); err != nil {
		f.t.Fatal(err)
	}
}

// update changes the Cluster live and returns it, as a cache would show it.
func (f *fixture) update(mutate func(*unstructured.Unstructured)) *unstructured.Unstructured {
	f.t.Helper()
	c := f.get(f.cluster)
	mutate(c)
	if err := f.admin.Update(f.ctx(), c); err != nil {
		f.t.Fatal(err)
	}
	return c
}
