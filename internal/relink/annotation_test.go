package relink

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
)

func TestEncodeDecode(t *testing.T) {
	owners := []OwnerRef{
		{APIVersion: "cluster.x-k8s.io/v1beta2", Kind: "MachineSet", Name: "ms", UID: "u-ms", Controller: ptr.To(true), BlockOwnerDeletion: ptr.To(true)},
		{APIVersion: "cluster.x-k8s.io/v1beta2", Kind: "Cluster", Name: "c1", UID: "u-c1", Controller: ptr.To(false)},
		{APIVersion: "v1", Kind: "ConfigMap", Name: "cm"},
	}
	value := Encode(owners)
	want := `{"version":2,"owners":[` +
		`{"apiVersion":"cluster.x-k8s.io/v1beta2","kind":"MachineSet","name":"ms","uid":"u-ms","controller":true,"blockOwnerDeletion":true},` +
		`{"apiVersion":"cluster.x-k8s.io/v1beta2","kind":"Cluster","name":"c1","uid":"u-c1","controller":false},` +
		`{"apiVersion":"v1","kind":"ConfigMap","name":"cm"}]}`
	if value != want {
		t.Fatalf("Encode = %s\nwant     %s", value, want)
	}
	if Encode(nil) != `{"version":2,"owners":[]}` {
		t.Fatalf("Encode(nil) = %s", Encode(nil))
	}
	// Decode then Encode: the second format round trips; backups made
	// before owner UIDs were recorded hold the first format, a JSON array
	// without UIDs; of duplicates, the first is kept.
	for _, tt := range []struct{ value, want string }{
		{value, value},
		{` [{"apiVersion":"cluster.x-k8s.io/v1beta1","kind":"Cluster","name":"c1"},` +
			`{"apiVersion":"cluster.x-k8s.io/v1beta2","kind":"MachineSet","name":"ms","controller":true,"blockOwnerDeletion":true}]`,
			`{"version":2,"owners":[{"apiVersion":"cluster.x-k8s.io/v1beta1","kind":"Cluster","name":"c1"},` +
				`{"apiVersion":"cluster.x-k8s.io/v1beta2","kind":"MachineSet","name":"ms","controller":true,"blockOwnerDeletion":true}]}`},
		{`[]`, `{"version":2,"owners":[]}`},
		{`null`, `{"version":2,"owners":[]}`},
		{`[{"apiVersion":"cluster.x-k8s.io/v1beta1","kind":"Cluster","name":"c1"},` +
			`{"apiVersion":"cluster.x-k8s.io/v1beta2","kind":"Cluster","name":"c1","controller":true}]`,
			`{"version":2,"owners":[{"apiVersion":"cluster.x-k8s.io/v1beta1","kind":"Cluster","name":"c1"}]}`},
	} {
		if got, err := Decode(tt.value); err != nil || Encode(got) != tt.want {
			t.Errorf("Decode(%s) then Encode = %s, %v\nwant %s", tt.value, Encode(got), err, tt.want)
		}
	}
}

func TestDecodeRejects(t *testing.T) {
	for _, value := range []string{
		``,
		`{`,
		`{"apiVersion":"v1","kind":"ConfigMap","name":"cm"}`,
		`{"owners":[]}`,
		`{"version":2}`,
		`{"version":3,"owners":[]}`,
		`{"version":"2","owners":[]}`,
		`{"version":2,"owners":[{"apiVersion":"v1","kind":"ConfigMap"}]}`,
		`{"version":2,"owners":[{"apiVersion":"v1","kind":"ConfigMap","name":"cm","uid":7}]}`,
		`[{"apiVersion":"v1","kind":"ConfigMap","name":"cm"}] []`,
		`[{"kind":"ConfigMap","name":"cm"}]`,
		`[{"apiVersion":"v1","name":"cm"}]`,
		`[{"apiVersion":"v1","kind":"ConfigMap"}]`,
		`[{"apiVersion":"a/b/c","kind":"ConfigMap","name":"cm"}]`,
		`[{"apiVersion":"group/","kind":"ConfigMap","name":"cm"}]`,
		`[{"apiVersion":"v1","kind":"ConfigMap","name":"cm","controller":"yes"}]`,
	} {
		if got, err := Decode(value); err == nil || !errors.Is(err, ErrInvalidAnnotation) {
			t.Errorf("Decode(%q) = %v, %v; want ErrInvalidAnnotation", value, got, err)
		}
	}
	if _, err := Decode(`{"version":3,"owners":[]}`); err == nil || !strings.Contains(err.Error(), "upgrade initlock-manager") {
		t.Errorf("a later version's error = %v, want it to say what to do", err)
	}
}

func FuzzDecode(f *testing.F) {
	for _, s := range []string{
		`[]`, `null`, `[{"apiVersion":"v1","kind":"ConfigMap","name":"cm"}]`,
		`{"version":2,"owners":[{"apiVersion":"v1","kind":"ConfigMap","name":"cm","uid":"u"}]}`,
		`[{"apiVersion":"cluster.x-k8s.io/v1beta2","kind":"Cluster","name":"c1","controller":true,"blockOwnerDeletion":false}]`,
		`[{"apiVersion":"","kind":"","name":""}]`, `{`, `[1,2]`,
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, value string) {
		owners, err := Decode(value)
		if err != nil {
			if !errors.Is(err, ErrInvalidAnnotation) {
				t.Fatalf("error %v does not wrap ErrInvalidAnnotation", err)
			}
			return
		}
		// What decodes re-encodes to something that decodes the same.
		again, err := Decode(Encode(owners))
		if err != nil {
			t.Fatalf("re-decoding %s: %v", Encode(owners), err)
		}
		if Encode(again) != Encode(owners) {
			t.Fatalf("not stable: %s then %s", Encode(owners), Encode(again))
		}
		seen := map[ownerKey]bool{}
		for _, o := range owners {
			if o.APIVersion == "" || o.Kind == "" || o.Name == "" || seen[o.key()] {
				t.Fatalf("Decode(%q) returned %+v", value, owners)
			}
			seen[o.key()] = true
		}
	})
}

func TestFromOwnerReferencesKeepsUIDs(t *testing.T) {
	refs := []metav1.OwnerReference{{APIVersion: "v1", Kind: "ConfigMap", Name: "cm", UID: "u1", Controller: ptr.To(true)}}
	got := FromOwnerReferences(refs)
	*refs[0].Controller = false
	if len(got) != 1 || !got[0].IsController() || got[0].Name != "cm" || got[0].UID != "u1" {
		t.Fatalf("FromOwnerReferences = %+v (and must not share pointers)", got)
	}
	if v := Encode(got); v != `{"version":2,"owners":[{"apiVersion":"v1","kind":"ConfigMap","name":"cm","uid":"u1","controller":true}]}` {
		t.Fatalf("encoded = %s", v)
	}
}

func TestMerge(t *testing.T) {
	a := []OwnerRef{{APIVersion: "cluster.x-k8s.io/v1beta2", Kind: "Cluster", Name: "c1"}}
	b := []OwnerRef{
		{APIVersion: "cluster.x-k8s.io/v1beta1", Kind: "Cluster", Name: "c1", Controller: ptr.To(true)},
		{APIVersion: "cluster.x-k8s.io/v1beta1", Kind: "Cluster", Name: "c2"},
		{APIVersion: "other.example.com/v1", Kind: "Cluster", Name: "c1"},
	}
	got := Encode(Merge(a, b))
	want := `{"version":2,"owners":[{"apiVersion":"cluster.x-k8s.io/v1beta2","kind":"Cluster","name":"c1"},` +
		`{"apiVersion":"cluster.x-k8s.io/v1beta1","kind":"Cluster","name":"c2"},` +
		`{"apiVersion":"other.example.com/v1","kind":"Cluster","name":"c1"}]}`
	if got != want {
		t.Fatalf("Merge = %s\nwant    %s", got, want)
	}
}

func TestParseKinds(t *testing.T) {
	tests := []struct {
		in      string
		want    string
		wantErr bool
	}{
		{in: "Machine.cluster.x-k8s.io", want: "[cluster.x-k8s.io/, Kind=Machine]"},
		{in: "KubeadmConfig.v1beta2.bootstrap.cluster.x-k8s.io, ConfigMap", want: "[bootstrap.cluster.x-k8s.io/v1beta2, Kind=KubeadmConfig /v1, Kind=ConfigMap]"},
		{in: "Secret.v1,Deployment.apps", want: "[/v1, Kind=Secret apps/, Kind=Deployment]"},
		{in: "Widget.v2alpha1.example.com", want: "[example.com/v2alpha1, Kind=Widget]"},
		{in: "", wantErr: true},
		{in: "machine.cluster.x-k8s.io", wantErr: true},
		{in: "Machine.cluster.x-k8s.io,Machine.v1beta1.cluster.x-k8s.io", wantErr: true},
	}
	for _, tt := range tests {
		got, err := ParseKinds(tt.in)
		if tt.wantErr {
			if err == nil {
				t.Errorf("ParseKinds(%q) = %v, want an error", tt.in, got)
			}
			continue
		}
		if err != nil || fmt.Sprint(got) != tt.want {
			t.Errorf("ParseKinds(%q) = %v, %v; want %s", tt.in, got, err, tt.want)
		}
	}
}

func TestLink(t *testing.T) {
	ms := OwnerRef{APIVersion: "cluster.x-k8s.io/v1beta2", Kind: "MachineSet", Name: "ms", Controller: ptr.To(true), BlockOwnerDeletion: ptr.To(true)}
	cl := OwnerRef{APIVersion: "cluster.x-k8s.io/v1beta2", Kind: "Cluster", Name: "c1"}
	ref := func(o OwnerRef, uid string) metav1.OwnerReference {
		return metav1.OwnerReference{APIVersion: o.APIVersion, Kind: o.Kind, Name: o.Name, UID: types.UID("uid-" + uid),
			Controller: cloneBool(o.Controller), BlockOwnerDeletion: cloneBool(o.BlockOwnerDeletion)}
	}
	other := metav1.OwnerReference{APIVersion: "v1", Kind: "ConfigMap", Name: "x", UID: "uid-x", Controller: ptr.To(true)}
	proven := func(o OwnerRef, apiVersion string, uid types.UID) Judgement {
		return Judgement{Owner: o, Verdict: VerdictSameRestore, UID: uid, APIVersion: apiVersion}
	}
	waits := func(o OwnerRef, v Verdict, uid types.UID) Judgement {
		return Judgement{Owner: o, Verdict: v, UID: uid, APIVersion: o.APIVersion}
	}
	tests := []struct {
		name        string
		existing    []metav1.OwnerReference
		found       []Judgement
		want        []metav1.OwnerReference
		wantChanged bool
		wantDemoted int
	}{
		{
			name:        "appends in recorded order",
			found:       []Judgement{proven(ms, ms.APIVersion, "uid-ms"), proven(cl, cl.APIVersion, "uid-c1")},
			want:        []metav1.OwnerReference{ref(ms, "ms"), ref(cl, "c1")},
			wantChanged: true,
		},
		{
			name:     "keeps a correct reference as it is",
			existing: []metav1.OwnerReference{{APIVersion: "cluster.x-k8s.io/v1beta1", Kind: "Cluster", Name: "c1", UID: "uid-c1"}},
			found:    []Judgement{proven(cl, cl.APIVersion, "uid-c1")},
			want:     []metav1.OwnerReference{{APIVersion: "cluster.x-k8s.io/v1beta1", Kind: "Cluster", Name: "c1", UID: "uid-c1"}},
		},
		{
			name:        "corrects a stale UID in place",
			existing:    []metav1.OwnerReference{ref(ms, "old"), ref(cl, "c1")},
			found:       []Judgement{proven(ms, ms.APIVersion, "uid-ms")},
			want:        []metav1.OwnerReference{ref(ms, "ms"), ref(cl, "c1")},
			wantChanged: true,
		},
		{
			name:        "no second controller",
			existing:    []metav1.OwnerReference{other},
			found:       []Judgement{proven(ms, ms.APIVersion, "uid-ms")},
			want:        []metav1.OwnerReference{other, {APIVersion: ms.APIVersion, Kind: "MachineSet", Name: "ms", UID: "uid-ms", BlockOwnerDeletion: ptr.To(true)}},
			wantChanged: true,
			wantDemoted: 1,
		},
		{
			name:        "a stale controller reference is replaced, not a second controller",
			existing:    []metav1.OwnerReference{ref(ms, "old")},
			found:       []Judgement{proven(ms, ms.APIVersion, "uid-ms")},
			want:        []metav1.OwnerReference{ref(ms, "ms")},
			wantChanged: true,
		},
		{
			name:     "owners not proven are not written, and their stale references are left",
			existing: []metav1.OwnerReference{ref(ms, "old")},
			found: []Judgement{waits(ms, VerdictUnproven, "uid-ms"), waits(cl, VerdictNotFound, ""),
				waits(OwnerRef{APIVersion: "v1", Kind: "Secret", Name: "s"}, VerdictDeleting, "uid-s")},
			want: []metav1.OwnerReference{ref(ms, "old")},
		},
		{
			name:     "an owner already linked is kept as it is",
			existing: []metav1.OwnerReference{ref(cl, "c1")},
			found:    []Judgement{waits(cl, VerdictLinked, "uid-c1")},
			want:     []metav1.OwnerReference{ref(cl, "c1")},
		},
		{
			name:        "the original owner is linked too",
			found:       []Judgement{{Owner: cl, Verdict: VerdictOriginal, UID: "uid-c1", APIVersion: cl.APIVersion}},
			want:        []metav1.OwnerReference{ref(cl, "c1")},
			wantChanged: true,
		},
		{
			name:        "served version replaces the recorded one",
			found:       []Judgement{proven(cl, "cluster.x-k8s.io/v1beta1", "uid-c1")},
			want:        []metav1.OwnerReference{{APIVersion: "cluster.x-k8s.io/v1beta1", Kind: "Cluster", Name: "c1", UID: "uid-c1"}},
			wantChanged: true,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			existing := append([]metav1.OwnerReference(nil), tt.existing...)
			got, changed, demoted := link(existing, tt.found)
			if fmt.Sprint(refsString(got)) != fmt.Sprint(refsString(tt.want)) || changed != tt.wantChanged || len(demoted) != tt.wantDemoted {
				t.Fatalf("link = %v, %v, %v\nwant   %v, %v, %d", refsString(got), changed, demoted, refsString(tt.want), tt.wantChanged, tt.wantDemoted)
			}
			if fmt.Sprint(refsString(existing)) != fmt.Sprint(refsString(tt.existing)) {
				t.Fatalf("link changed its input: %v", refsString(existing))
			}
		})
	}
}

func refsString(refs []metav1.OwnerReference) []string {
	var out []string
	for _, r := range refs {
		out = append(out, fmt.Sprintf("%s/%s/%s/%s/c=%v/b=%v", r.APIVersion, r.Kind, r.Name, r.UID,
			ptrString(r.Controller), ptrString(r.BlockOwnerDeletion)))
	}
	return out
}

func ptrString(b *bool) string {
	if b == nil {
		return "nil"
	}
	return fmt.Sprint(*b)
}

func TestTrimCluster(t *testing.T) {
	u := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "cluster.x-k8s.io/v1beta2", "kind": "Cluster",
		"metadata": map[string]any{"name": "c1", "managedFields": []any{map[string]any{"manager": "x"}}, "annotations": map[string]any{"a": "b"}},
		"spec":     map[string]any{"paused": true, "controlPlaneEndpoint": map[string]any{"host": "h"}},
		"status":   map[string]any{"phase": "Provisioned"},
	}}
	out, err := trimCluster(u)
	if err != nil {
		t.Fatal(err)
	}
	got := out.(*unstructured.Unstructured)
	want := `map[apiVersion:cluster.x-k8s.io/v1beta2 kind:Cluster metadata:map[annotations:map[a:b] name:c1] spec:map[paused:true]]`
	if fmt.Sprint(got.Object) != want {
		t.Fatalf("trimCluster = %v", got.Object)
	}
	if other, _ := trimCluster("x"); other != "x" {
		t.Fatal("trimCluster changed a non-object")
	}
	if gk := (OwnerRef{APIVersion: "v1", Kind: "Secret"}).GroupKind(); gk != (schema.GroupKind{Kind: "Secret"}) {
		t.Fatalf("GroupKind = %v", gk)
	}
}
