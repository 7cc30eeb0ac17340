package apimodel

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"reflect"
	"testing"

	"k8s.io/apimachinery/pkg/types"
)

// FuzzApplyPatch holds applyPatch to json-patch v4, the library the API
// server uses: whatever it applies natively, the library applies too, to
// the same object.
func FuzzApplyPatch(f *testing.F) {
	docs := []string{
		`{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"c1-lock","namespace":"ns","uid":"u1","resourceVersion":"7","labels":{"cluster.x-k8s.io/cluster-name":"c1"},"annotations":{"initlock.dev/releasable":"u1"},"ownerReferences":[{"apiVersion":"cluster.x-k8s.io/v1beta2","kind":"Cluster","name":"c1","uid":"c"}],"finalizers":["f"]},"data":{"lock-information":"{\"machineName\":\"m1\"}"}}`,
		`{"apiVersion":"cluster.x-k8s.io/v1beta2","kind":"Cluster","metadata":{"name":"c1","namespace":"ns","uid":"c","generation":2},"spec":{"paused":false,"n":1.5,"list":[1,"a",{"k":null}]},"status":{"phase":"x"}}`,
		`{"metadata":{"name":"x","annotations":null}}`,
	}
	seeds := []struct {
		merge bool
		patch string
	}{
		{false, `[{"op":"test","path":"/metadata/uid","value":"c"},{"op":"test","path":"/spec/paused","value":false},{"op":"test","path":"/metadata/annotations","value":null},{"op":"add","path":"/metadata/annotations","value":{"initlock.dev/init-lock-grant":"{\"m\":\"a<b\"}"}}]`},
		{false, `[{"op":"test","path":"/metadata/annotations/initlock.dev~1releasable","value":"u1"},{"op":"replace","path":"/metadata/annotations/initlock.dev~1releasable","value":"u2"}]`},
		{false, `[{"op":"remove","path":"/metadata/finalizers"},{"op":"remove","path":"/metadata/labels/cluster.x-k8s.io~1cluster-name"}]`},
		{false, `[{"op":"test","path":"/spec","value":{"paused":false,"n":1.5,"list":[1,"a",{"k":null}]}},{"op":"replace","path":"/spec/x","value":1e3}]`},
		{false, `[{"op":"test","path":"/metadata/generation","value":2.0},{"op":"add","path":"/metadata/annotations/a","value":null},{"op":"move","from":"/a","path":"/b"}]`},
		{false, `[{"op":"test","path":"/metadata/annotations/x"},{"op":"add","path":"/metadata/ownerReferences/0/name","value":"d"},{"op":"add","path":"","value":{}}]`},
		{true, `{"metadata":{"annotations":{"initlock.dev/releasable":null,"b":"c"},"labels":{"velero.io/restore-name":"r1"}},"data":null}`},
		{true, `{"spec":{"paused":true,"list":[null,{"a":null}],"new":{"a":null,"b":{"c":null,"d":1}}},"kind":{"x":null}}`},
		{true, `null`},
		{true, `[1]`},
	}
	for i := range docs {
		for _, s := range seeds {
			f.Add(i, s.merge, s.patch)
		}
	}
	r := rand.New(rand.NewPCG(1, 2))
	for range 3000 {
		merge := r.IntN(2) == 0
		f.Add(r.IntN(len(docs)), merge, randomPatch(r, merge))
	}
	f.Fuzz(func(t *testing.T, doc int, merge bool, patch string) {
		if doc < 0 || doc >= len(docs) {
			return
		}
		cur, err := decode([]byte(docs[doc]))
		if err != nil {
			t.Fatal(err)
		}
		pt := types.JSONPatchType
		if merge {
			pt = types.MergePatchType
		}
		before := deepCopy(cur)
		got, ok := applyPatch(cur, pt, []byte(patch))
		if !reflect.DeepEqual(cur, before) {
			t.Fatalf("applyPatch changed the stored object")
		}
		want, err := safeLibraryPatch(cur, pt, []byte(patch))
		if !ok {
			return // the library decides
		}
		if err != nil {
			t.Fatalf("applied %s natively, but the library fails: %v", patch, err)
		}
		if !reflect.DeepEqual(got, want) {
			g, _ := json.Marshal(got)
			w, _ := json.Marshal(want)
			t.Fatalf("patch %s:\nnatively %s\nlibrary  %s", patch, g, w)
		}
	})
}

// randomPatch writes a patch from the paths and values the project's
// writers use and their near misses.
func randomPatch(r *rand.Rand, merge bool) string {
	values := []any{nil, "u1", "c", "7", false, true, 1, 1.5, 2.0, "a<b", "{\"machineName\":\"m1\"}",
		map[string]any{"k": "v"}, map[string]any{"k": nil}, []any{1, nil}, []any{}, map[string]any{}}
	if merge {
		keys := []string{"metadata", "annotations", "labels", "initlock.dev/releasable", "spec", "paused", "data", "kind", "status", "list"}
		var obj func(depth int) map[string]any
		obj = func(depth int) map[string]any {
			m := map[string]any{}
			for range r.IntN(3) + 1 {
				if depth < 2 && r.IntN(2) == 0 {
					m[keys[r.IntN(len(keys))]] = obj(depth + 1)
				} else {
					m[keys[r.IntN(len(keys))]] = values[r.IntN(len(values))]
				}
			}
			return m
		}
		b, _ := json.Marshal(obj(0))
		return string(b)
	}
	paths := []string{"", "/metadata/uid", "/metadata/annotations", "/metadata/annotations/initlock.dev~1releasable",
		"/metadata/annotations/b", "/metadata/labels/cluster.x-k8s.io~1cluster-name", "/metadata/finalizers",
		"/metadata/ownerReferences/0/name", "/spec", "/spec/paused", "/spec/list/1/k", "/data/lock-information",
		"/nope/x", "/metadata/a~0b~1c", "metadata"}
	kinds := []string{"test", "test", "add", "replace", "remove", "move", "copy"}
	var ops []map[string]any
	for range r.IntN(4) + 1 {
		op := map[string]any{"op": kinds[r.IntN(len(kinds))], "path": paths[r.IntN(len(paths))]}
		if r.IntN(5) > 0 {
			op["value"] = values[r.IntN(len(values))]
		}
		if r.IntN(3) == 0 {
			op["from"] = paths[r.IntN(len(paths))]
		}
		ops = append(ops, op)
	}
	b, _ := json.Marshal(ops)
	return string(b)
}

// safeLibraryPatch is libraryPatch, failing where the library panics (a
// test of the whole document against null does).
func safeLibraryPatch(cur map[string]any, pt types.PatchType, patch []byte) (_ map[string]any, err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("the library panics: %v", r)
		}
	}()
	return libraryPatch(cur, pt, patch)
}
