package apimodel

import (
	"bytes"
	"encoding/json"
	"strings"

	"k8s.io/apimachinery/pkg/types"
)

// applyPatch applies a JSON patch or a merge patch to a copy of cur, the
// stored (normalized) object, without encoding it: it gives the object the
// library the API server uses (json-patch v4) would give, or ok false when
// it cannot tell, for a patch it does not read (an operation other than
// test, add, replace and remove, a path through a list, a null inside a
// list of a merge patch, a test of a value the API server compares by other
// means) or one that fails. The caller then asks the library, which gives
// the result and the API server's error. FuzzApplyPatch holds the two to
// the same results.
func applyPatch(cur map[string]any, pt types.PatchType, patch []byte) (map[string]any, bool) {
	switch pt {
	case types.MergePatchType:
		if !json.Valid(patch) { // decode would read a first value and stop
			return nil, false
		}
		p, err := decode(patch)
		if err != nil || p == nil || nullInList(p, false) {
			return nil, false
		}
		return mergeValue(deepCopy(cur), p).(map[string]any), true
	case types.JSONPatchType:
		var ops []map[string]json.RawMessage
		if err := json.Unmarshal(patch, &ops); err != nil {
			return nil, false
		}
		doc := deepCopy(cur)
		for _, op := range ops {
			if !applyOp(doc, op) {
				return nil, false
			}
		}
		return doc, true
	}
	return nil, false
}

// mergeValue merges patch into cur as RFC 7386 and json-patch v4 do: an
// object merges key by key (null removes), anything else replaces, and an
// object merged where there was none loses its nulls.
func mergeValue(cur, patch any) any {
	p, ok := patch.(map[string]any)
	if !ok {
		return patch
	}
	c, ok := cur.(map[string]any)
	if !ok {
		c = map[string]any{}
	}
	for k, v := range p {
		if v == nil {
			delete(c, k)
			continue
		}
		c[k] = mergeValue(c[k], v)
	}
	return c
}

// nullInList tells whether v holds a null inside a list, at any depth:
// json-patch v4 prunes those in some merges and not in others.
func nullInList(v any, inList bool) bool {
	switch x := v.(type) {
	case nil:
		return inList
	case map[string]any:
		for _, e := range x {
			if nullInList(e, inList) {
				return true
			}
		}
	case []any:
		for _, e := range x {
			if nullInList(e, true) {
				return true
			}
		}
	}
	return false
}

// applyOp applies one operation of a JSON patch to doc; false when it
// fails or is not one applyPatch reads.
func applyOp(doc map[string]any, op map[string]json.RawMessage) bool {
	var kind, path string
	if json.Unmarshal(op["op"], &kind) != nil || json.Unmarshal(op["path"], &path) != nil {
		return false
	}
	parent, key, ok := container(doc, path)
	if !ok {
		return false
	}
	raw, hasValue := op["value"]
	switch kind {
	case "test":
		cur := parent[key]
		if !hasValue || string(raw) == "null" {
			return cur == nil
		}
		if cur == nil {
			return false
		}
		// The library compares the value's text; encoding/json writes it
		// as the stored object was written.
		want, err := json.Marshal(cur)
		var got bytes.Buffer
		return err == nil && json.Compact(&got, raw) == nil && bytes.Equal(want, got.Bytes())
	case "add", "replace":
		if !hasValue {
			return false
		}
		v, err := decodeValue(raw)
		if err != nil {
			return false
		}
		parent[key] = v
		return true
	case "remove":
		if _, ok := parent[key]; !ok {
			return false
		}
		delete(parent, key)
		return true
	}
	return false
}

// container finds the object a JSON pointer's last token names a key of,
// through objects only.
func container(doc map[string]any, path string) (map[string]any, string, bool) {
	parts := strings.Split(path, "/")
	if len(parts) < 2 || parts[0] != "" {
		return nil, "", false
	}
	for _, p := range parts[1 : len(parts)-1] {
		next, ok := doc[pointerToken.Replace(p)].(map[string]any)
		if !ok {
			return nil, "", false
		}
		doc = next
	}
	return doc, pointerToken.Replace(parts[len(parts)-1]), true
}

// pointerToken unescapes a JSON pointer's token, in one pass.
var pointerToken = strings.NewReplacer("~1", "/", "~0", "~")

// decodeValue reads one JSON value as decode does.
func decodeValue(raw []byte) (any, error) {
	var v any
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	if err := dec.Decode(&v); err != nil {
		return nil, err
	}
	return fixNumbers(v), nil
}
