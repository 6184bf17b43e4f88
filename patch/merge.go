package patch

import (
	"encoding/json"
	"fmt"

	"github.com/kapi-dev/kapi/codec"
)

// Merge applies an RFC 7386 JSON Merge Patch, p, to a copy of cur and
// returns the patched object and the duplicate keys of the patch as field
// validation problems (`duplicate field "spec.size"`). cur is not modified.
// The patch must be a JSON object (400 otherwise).
//
// The merge runs on generic values, one map operation per key of the
// patch: linear in the sizes of the patch and of cur (the json-patch
// library scans an object's keys for every key it sets).
func Merge(cur map[string]any, p []byte) (map[string]any, []string, error) {
	pm, problems, err := decodeMergePatch(p)
	if err != nil {
		return nil, nil, err
	}
	doc, err := genericCopy(cur)
	if err != nil {
		return nil, nil, err
	}
	dm, _ := doc.(map[string]any)
	if dm == nil {
		dm = map[string]any{}
	}
	return mergeObject(dm, pm), problems, nil
}

// MergePatch is Merge on JSON: it applies the merge patch p to doc, a JSON
// object, and returns the patched JSON. A doc that is not JSON, or is null,
// is a 422.
func MergePatch(doc, p []byte) (patched []byte, problems []string, err error) {
	pm, problems, err := decodeMergePatch(p)
	if err != nil {
		return nil, nil, err
	}
	d, _, derr := codec.DecodeJSON(doc)
	if derr != nil || d == nil {
		return nil, nil, invalid("the patch cannot be applied: Invalid JSON Document")
	}
	var out any
	if dm, ok := d.(map[string]any); ok {
		out = mergeObject(dm, pm)
	} else {
		out = pruneNulls(pm)
	}
	b, err := json.Marshal(out)
	if err != nil {
		return nil, nil, invalid("the patch cannot be applied: %v", err)
	}
	return b, problems, nil
}

// decodeMergePatch decodes a merge patch, which must be a JSON object.
func decodeMergePatch(p []byte) (map[string]any, []string, error) {
	v, dups, err := codec.DecodeJSON(p)
	if err != nil {
		return nil, nil, badRequest("error decoding patch: %v", err)
	}
	pm, ok := v.(map[string]any)
	if !ok {
		return nil, nil, badRequest("error decoding patch: a merge patch must be a JSON object, not %s", jsonKind(v))
	}
	var problems []string
	for _, d := range dups {
		problems = append(problems, fmt.Sprintf("duplicate field %q", d))
	}
	return pm, problems, nil
}

// mergeObject merges the patch p into doc, both owned by the caller (the
// patch's values move into doc), and returns doc. A null deletes its key;
// any other value merges with doc's (mergeValue).
func mergeObject(doc, p map[string]any) map[string]any {
	for k, pv := range p {
		if pv == nil {
			delete(doc, k)
			continue
		}
		doc[k] = mergeValue(doc[k], pv)
	}
	return doc
}

// mergeValue is the merge of p, not null, into cur, as the json-patch
// library does it: two objects merge; onto an object, a non-object patch
// replaces it as it is; onto anything else (a missing key, null, an array,
// a scalar) the patch replaces it with its nulls pruned, including inside
// the objects of its arrays.
func mergeValue(cur, p any) any {
	cm, ok := cur.(map[string]any)
	if !ok {
		return pruneNulls(p)
	}
	pm, ok := p.(map[string]any)
	if !ok {
		return p
	}
	return mergeObject(cm, pm)
}

// pruneNulls removes, in place, the null members of the objects in v (at
// any depth, arrays included; nulls in arrays stay) and returns v.
func pruneNulls(v any) any {
	switch t := v.(type) {
	case map[string]any:
		for k, e := range t {
			if e == nil {
				delete(t, k)
			} else {
				pruneNulls(e)
			}
		}
	case []any:
		for _, e := range t {
			pruneNulls(e)
		}
	}
	return v
}

// genericCopy is a deep copy of v in the form codec.DecodeJSON returns.
// Values of other types (an int64, a typed map a strategy hook may have
// stored) go through JSON, as the whole object used to.
func genericCopy(v any) (any, error) {
	switch t := v.(type) {
	case nil, string, bool, json.Number:
		return v, nil
	case map[string]any:
		if t == nil {
			return nil, nil
		}
		out := make(map[string]any, len(t))
		for k, e := range t {
			c, err := genericCopy(e)
			if err != nil {
				return nil, err
			}
			out[k] = c
		}
		return out, nil
	case []any:
		if t == nil {
			return nil, nil
		}
		out := make([]any, len(t))
		for i, e := range t {
			c, err := genericCopy(e)
			if err != nil {
				return nil, err
			}
			out[i] = c
		}
		return out, nil
	}
	b, err := json.Marshal(v)
	if err != nil {
		return nil, err
	}
	g, _, err := codec.DecodeJSON(b)
	return g, err
}
