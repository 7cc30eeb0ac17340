package apimodel

import (
	"bytes"
	"encoding/json"
	"fmt"

	"k8s.io/apimachinery/pkg/runtime"
)

func metadata(obj map[string]any) map[string]any {
	m, ok := obj["metadata"].(map[string]any)
	if !ok {
		m = map[string]any{}
		obj["metadata"] = m
	}
	return m
}

// normalize makes obj a plain JSON document (numbers as int64 or float64,
// no empty metadata maps), as it would come back from the API server.
func normalize(obj map[string]any) map[string]any {
	js, err := json.Marshal(obj)
	if err != nil {
		panic(fmt.Sprintf("apimodel: object is not JSON: %v", err))
	}
	out, err := decode(js)
	if err != nil {
		panic(err)
	}
	return tidy(out)
}

// tidy drops the empty metadata maps and lists of a plain JSON object, as
// the API server does.
func tidy(out map[string]any) map[string]any {
	meta := metadata(out)
	for _, f := range []string{"annotations", "labels", "ownerReferences", "finalizers"} {
		switch v := meta[f].(type) {
		case map[string]any:
			if len(v) == 0 {
				delete(meta, f)
			}
		case []any:
			if len(v) == 0 {
				delete(meta, f)
			}
		}
	}
	return out
}

// decode reads a JSON document as the API machinery does: integers as
// int64, other numbers as float64.
func decode(js []byte) (map[string]any, error) {
	out := map[string]any{}
	dec := json.NewDecoder(bytes.NewReader(js))
	dec.UseNumber()
	if err := dec.Decode(&out); err != nil {
		return nil, err
	}
	fixNumbers(out)
	return out, nil
}

// fixNumbers turns json.Numbers into int64 or float64, as the API
// machinery's JSON decoding does.
func fixNumbers(v any) any {
	switch x := v.(type) {
	case map[string]any:
		for k, e := range x {
			x[k] = fixNumbers(e)
		}
	case []any:
		for i, e := range x {
			x[i] = fixNumbers(e)
		}
	case json.Number:
		if i, err := x.Int64(); err == nil {
			return i
		}
		f, _ := x.Float64()
		return f
	}
	return v
}

// deepCopy copies a stored (normalized) object.
func deepCopy(obj map[string]any) map[string]any {
	if obj == nil {
		return nil
	}
	return runtime.DeepCopyJSON(obj)
}
