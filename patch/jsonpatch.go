package patch

import (
	"errors"
	"fmt"
	"strconv"

	jsonpatch "github.com/evanphx/json-patch/v5"

	"github.com/kapi-dev/kapi/codec"
	"github.com/kapi-dev/kapi/meta"
)

// MaxJSONPatchOperations is the most operations a JSON patch may have, as in
// kube-apiserver; more is a 413.
const MaxJSONPatchOperations = 10000

// MaxJSONPatchWork bounds the number of operations of a JSON patch times the
// size of the document it patches: the JSON patch library copies a list
// (and scans an object's keys) on every operation that changes it, so 10,000
// operations on a list of 140,000 entries moved 11 GB. A patch beyond it is
// refused (413) before any operation runs.
const MaxJSONPatchWork = 1 << 27

// jsonPatchOpKeys are the members an RFC 6902 operation may have.
var jsonPatchOpKeys = map[string]bool{"op": true, "path": true, "from": true, "value": true}

// JSONPatch applies an RFC 6902 JSON Patch to doc, a JSON object, and returns
// the patched JSON. problems are field validation findings in the patch
// itself: duplicate keys and members an operation does not have, worded like
// kube-apiserver's (`json patch unknown field "[0].foo"`); the caller reports
// them per the fieldValidation level.
//
// copyLimit bounds the bytes "copy" operations may add in total (0: no
// limit), so that a small patch cannot blow up into a huge document.
//
// A patch that is not a JSON array of operations is a 400 Error; one that
// does not apply (a failed "test", a path that does not exist, an unknown
// op) is a 422 Error and doc is untouched.
func JSONPatch(doc, patch []byte, copyLimit int64) (patched []byte, problems []string, err error) {
	v, dups, derr := codec.DecodeJSON(patch)
	if derr != nil {
		return nil, nil, badRequest("error decoding patch: %v", derr)
	}
	ops, ok := v.([]any)
	if !ok {
		return nil, nil, badRequest("error decoding patch: a JSON patch must be a JSON array of operations, not %s", jsonKind(v))
	}
	if len(ops) > MaxJSONPatchOperations {
		return nil, nil, tooLarge("The allowed maximum operations in a JSON patch is %d, got %d", MaxJSONPatchOperations, len(ops))
	}
	if int64(len(ops))*int64(len(doc)) > MaxJSONPatchWork {
		return nil, nil, tooLarge("a JSON patch of an object of %d bytes may have at most %d operations, got %d", len(doc), MaxJSONPatchWork/max(len(doc), 1), len(ops))
	}
	for _, d := range dups {
		problems = append(problems, fmt.Sprintf("json patch duplicate field %q", d))
	}
	for i, o := range ops {
		m, ok := o.(map[string]any)
		if !ok {
			return nil, nil, badRequest("error decoding patch: operation %d is %s, not a JSON object", i, jsonKind(o))
		}
		for _, k := range meta.SortedKeys(m) {
			if !jsonPatchOpKeys[k] {
				problems = append(problems, fmt.Sprintf("json patch unknown field %q", "["+strconv.Itoa(i)+"]."+k))
			}
		}
		if err := checkOperation(i, m); err != nil {
			return nil, nil, err
		}
	}
	p, err := jsonpatch.DecodePatch(patch)
	if err != nil {
		return nil, nil, badRequest("error decoding patch: %v", err)
	}
	opts := jsonpatch.NewApplyOptions()
	opts.AccumulatedCopySizeLimit = copyLimit
	opts.EscapeHTML = false
	out, err := safely(func() ([]byte, error) { return p.ApplyWithOptions(doc, opts) })
	if err != nil {
		var pe *Error
		if errors.As(err, &pe) {
			return nil, nil, pe
		}
		var ae *jsonpatch.AccumulatedCopySizeError
		if errors.As(err, &ae) {
			return nil, nil, tooLarge("the patch copies more than %d bytes", copyLimit)
		}
		if errors.Is(err, jsonpatch.ErrTestFailed) {
			return nil, nil, invalid("%v", err)
		}
		return nil, nil, invalid("the patch cannot be applied: %v", err)
	}
	return out, problems, nil
}

// checkOperation checks the members RFC 6902 requires of operation i: a
// known op, a path string, a value for add, replace and test, a from string
// for move and copy.
func checkOperation(i int, m map[string]any) error {
	op, ok := m["op"].(string)
	if !ok {
		return badRequest("error decoding patch: operation %d has no \"op\" string", i)
	}
	if _, ok := m["path"].(string); !ok {
		return badRequest("error decoding patch: operation %d (%s) has no \"path\" string", i, op)
	}
	switch op {
	case "add", "replace", "test":
		if _, ok := m["value"]; !ok {
			return badRequest("error decoding patch: operation %d (%s) has no \"value\"", i, op)
		}
	case "move", "copy":
		if _, ok := m["from"].(string); !ok {
			return badRequest("error decoding patch: operation %d (%s) has no \"from\" string", i, op)
		}
	case "remove":
	default:
		return badRequest("error decoding patch: operation %d has the unknown op %q", i, op)
	}
	return nil
}

// safely runs a json-patch library call, turning a panic (a library bug on
// odd input) into a 422 rather than a failed request.
func safely(fn func() ([]byte, error)) (out []byte, err error) {
	defer func() {
		if v := recover(); v != nil {
			out, err = nil, invalid("the patch cannot be applied: %v", v)
		}
	}()
	return fn()
}

// jsonKind names the JSON type of a generic value for messages.
func jsonKind(v any) string {
	switch v.(type) {
	case nil:
		return "null"
	case map[string]any:
		return "an object"
	case []any:
		return "an array"
	case string:
		return "a string"
	case bool:
		return "a boolean"
	default:
		return "a number"
	}
}
