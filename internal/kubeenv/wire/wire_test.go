package wire_test

import (
	"errors"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/initlock/initlock/internal/kubeenv/wire"
)

func TestDecodeRecord(t *testing.T) {
	for _, tc := range []struct {
		name, data, machine, token string
		err                        bool
		noMachine                  bool
	}{
		// docs/design.md section 1's example, as initlock writes it.
		{name: "initlock", data: `{"machineName":"c1-cp-0","machineUID":"a7cef6a1-576a-486c-bfc2-7b2bffe39ab9","clusterUID":"4123ee65-12c9-481e-a6b9-3cc0a835f0fc","token":"9f0c3d5e6b1a48c2a0e1f3b7c2d4e6f8","acquiredAt":"2026-12-03T13:57:29Z"}`,
			machine: "c1-cp-0", token: "9f0c3d5e6b1a48c2a0e1f3b7c2d4e6f8"},
		{name: "upstream", data: `{"machineName":"c1-cp-0"}`, machine: "c1-cp-0"},
		{name: "unknown fields ignored", data: `{"machineName":"m","later":1}`, machine: "m"},
		{name: "no machine", data: `{"token":"t"}`, err: true, noMachine: true},
		{name: "not JSON", data: `c1-cp-0`, err: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r, err := wire.DecodeRecord(tc.data)
			if (err != nil) != tc.err || errors.Is(err, wire.ErrNoMachine) != tc.noMachine {
				t.Fatalf("DecodeRecord(%s) error = %v, want error %v (no machine %v)", tc.data, err, tc.err, tc.noMachine)
			}
			if r.MachineName != tc.machine || r.Token != tc.token {
				t.Fatalf("DecodeRecord(%s) = %+v, want machine %q, token %q", tc.data, r, tc.machine, tc.token)
			}
			if err == nil {
				if again, err := wire.DecodeRecord(r.Encode()); err != nil || again.Encode() != r.Encode() {
					t.Fatalf("Encode then DecodeRecord = %+v, %v, want %+v", again, err, r)
				}
			}
		})
	}
}

func TestGrantFrom(t *testing.T) {
	for _, tc := range []struct {
		name        string
		annotations map[string]string
		nilGrant    bool
		held, rel   bool
		machine     string
	}{
		{name: "none", annotations: map[string]string{"other": "x"}, nilGrant: true},
		{name: "granted", annotations: map[string]string{wire.GrantAnnotation: `{"machineName":"m1","machineUID":"u","clusterUID":"c","token":"t","acquiredAt":"2026-12-03T13:57:29Z"}`}, held: true, machine: "m1"},
		{name: "released", annotations: map[string]string{wire.GrantAnnotation: `{"token":"t","releasedAt":"2026-12-03T13:57:29Z"}`}, rel: true},
		{name: "damaged", annotations: map[string]string{wire.GrantAnnotation: `[`}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := wire.GrantFrom(tc.annotations)
			if (g == nil) != tc.nilGrant || g.Held() != tc.held || g.Released() != tc.rel {
				t.Fatalf("GrantFrom(%v) = %+v: held %v, released %v; want nil %v, held %v, released %v", tc.annotations, g, g.Held(), g.Released(), tc.nilGrant, tc.held, tc.rel)
			}
			if g != nil && (g.MachineName != tc.machine || g.Raw() != tc.annotations[wire.GrantAnnotation]) {
				t.Fatalf("GrantFrom(%v) = %+v (raw %q), want machine %q and the value as read", tc.annotations, g, g.Raw(), tc.machine)
			}
		})
	}
}

func TestNames(t *testing.T) {
	initlock := wire.Ref{MachineName: "m1", MachineUID: "mu1", ClusterUID: "cu1"}
	for _, tc := range []struct {
		name       string
		ref        wire.Ref
		clusterUID types.UID
		machine    string
		uid        types.UID
		want       bool
	}{
		{name: "same incarnations", ref: initlock, clusterUID: "cu1", machine: "m1", uid: "mu1", want: true},
		{name: "machine created again", ref: initlock, clusterUID: "cu1", machine: "m1", uid: "mu2"},
		{name: "cluster restored: by name", ref: initlock, clusterUID: "cu2", machine: "m1", uid: "mu2", want: true},
		{name: "upstream: by name", ref: wire.Ref{MachineName: "m1"}, clusterUID: "cu1", machine: "m1", uid: "mu9", want: true},
		{name: "another machine", ref: initlock, clusterUID: "cu2", machine: "m2", uid: "mu1"},
		{name: "names none", ref: wire.Ref{}, clusterUID: "cu1"},
	} {
		if got := tc.ref.Names(tc.clusterUID, tc.machine, tc.uid); got != tc.want {
			t.Errorf("%s: %+v.Names(%s, %s, %s) = %v, want %v", tc.name, tc.ref, tc.clusterUID, tc.machine, tc.uid, got, tc.want)
		}
	}
}

func TestLockOf(t *testing.T) {
	lock := func(label string, data map[string]string, annotations map[string]string) *corev1.ConfigMap {
		return &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "c1-lock", Namespace: "ns", UID: "l1",
			Labels: map[string]string{wire.ClusterNameLabel: label}, Annotations: annotations}, Data: data}
	}
	record := map[string]string{wire.DataKey: `{"machineName":"m1"}`}
	for _, tc := range []struct {
		name                 string
		cm                   *corev1.ConfigMap
		err                  bool
		machine              string
		releasable, moveMark bool
	}{
		{name: "lock", cm: lock("c1", record, nil), machine: "m1"},
		{name: "another cluster's label", cm: lock("c2", record, nil), err: true},
		{name: "no record", cm: lock("c1", map[string]string{"other": "x"}, nil), err: true},
		{name: "corrupt", cm: lock("c1", map[string]string{wire.DataKey: "{"}, nil), err: true},
		{name: "marked", cm: lock("c1", record, map[string]string{wire.ReleaseAnnotation: "l1", wire.MoveAnnotation: ""}), machine: "m1", releasable: true, moveMark: true},
		{name: "another lock's mark", cm: lock("c1", record, map[string]string{wire.ReleaseAnnotation: "l0"}), machine: "m1"},
	} {
		l := wire.LockOf(tc.cm, "c1")
		if (l.Err != nil) != tc.err || l.Record.MachineName != tc.machine || l.Releasable != tc.releasable || l.MoveMark != tc.moveMark || l.UID != "l1" {
			t.Errorf("%s: LockOf = %+v, want error %v, machine %q, releasable %v, move mark %v", tc.name, l, tc.err, tc.machine, tc.releasable, tc.moveMark)
		}
	}
}
