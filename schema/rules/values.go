package rules

import (
	"encoding/base64"
	"encoding/json"
	"fmt"
	"math"
	"reflect"
	"time"

	"github.com/google/cel-go/common/types"
	"github.com/google/cel-go/common/types/ref"
	"github.com/google/cel-go/common/types/traits"

	"github.com/kapi-dev/kapi/meta"
	"github.com/kapi-dev/kapi/schema"
)

// value is the CEL value of v, a generic JSON value (maps, slices, strings,
// json.Number, numbers, bools, nil) described by n (nil: no schema, every
// value as JSON types it). Objects, lists and maps convert their members
// only when a rule reads them.
func value(v any, n *node) ref.Val {
	if v == nil {
		return types.NullValue
	}
	if n == nil || n.typ == types.DynType {
		return dynValue(v)
	}
	switch x := v.(type) {
	case map[string]any:
		if n.fields != nil {
			return &object{n: n, m: x}
		}
		return types.NewDynamicMap(adapter{n.elem}, x)
	case []any:
		return &list{Lister: types.NewDynamicList(adapter{n.elem}, x), n: n, items: x}
	case string:
		return stringValue(x, n.s)
	case bool:
		return types.Bool(x)
	}
	return numberValue(v, n.typ == types.DoubleType)
}

// dynValue is the CEL value of a JSON value without a schema: integers as
// int, other numbers as double.
func dynValue(v any) ref.Val {
	switch x := v.(type) {
	case nil:
		return types.NullValue
	case map[string]any:
		return types.NewDynamicMap(adapter{}, x)
	case []any:
		return types.NewDynamicList(adapter{}, x)
	case string:
		return types.String(x)
	case bool:
		return types.Bool(x)
	}
	return numberValue(v, false)
}

// numberValue is a JSON number as CEL int (when integral and asDouble is
// false) or double.
func numberValue(v any, asDouble bool) ref.Val {
	switch x := v.(type) {
	case json.Number:
		if !asDouble {
			if i, err := x.Int64(); err == nil {
				return types.Int(i)
			}
		}
		f, err := x.Float64()
		if err != nil {
			return types.NewErr("invalid number %s", x)
		}
		return types.Double(f)
	case int64:
		if asDouble {
			return types.Double(float64(x))
		}
		return types.Int(x)
	case int:
		if asDouble {
			return types.Double(float64(x))
		}
		return types.Int(x)
	case float64:
		if !asDouble && x == math.Trunc(x) && math.Abs(x) < 1<<63 {
			return types.Int(int64(x))
		}
		return types.Double(x)
	}
	return types.NewErr("unsupported value of type %T", v)
}

// stringValue is a string of schema s: bytes, a duration or a timestamp
// for those formats, as Kubernetes gives them to rules.
func stringValue(x string, s *schema.Schema) ref.Val {
	switch s.Format {
	case "byte":
		b, err := base64.StdEncoding.DecodeString(x)
		if err != nil {
			return types.NewErr("invalid base64 %q: %v", x, err)
		}
		return types.Bytes(b)
	case "duration":
		d, err := time.ParseDuration(x)
		if err != nil {
			return types.NewErr("invalid duration %q: %v", x, err)
		}
		return types.Duration{Duration: d}
	case "date":
		t, err := time.Parse(time.DateOnly, x)
		if err != nil {
			return types.NewErr("invalid date %q: %v", x, err)
		}
		return types.Timestamp{Time: t}
	case "date-time":
		t, err := time.Parse(time.RFC3339Nano, x)
		if err != nil {
			return types.NewErr("invalid date-time %q: %v", x, err)
		}
		return types.Timestamp{Time: t}
	}
	return types.String(x)
}

// adapter converts the members of a list or map by their schema node.
type adapter struct{ n *node }

func (a adapter) NativeToValue(v any) ref.Val {
	if rv, ok := v.(ref.Val); ok {
		return rv
	}
	return value(v, a.n)
}

// object is a JSON object with declared properties: reading a property it
// does not have is an error ("no such key"), has() tests presence.
type object struct {
	n *node
	m map[string]any
}

var (
	_ traits.Indexer     = (*object)(nil)
	_ traits.FieldTester = (*object)(nil)
)

// field is the declared field index names, or the error of reading it.
func (o *object) field(index ref.Val) (*field, ref.Val) {
	name, ok := index.(types.String)
	if !ok {
		return nil, types.ValOrErr(index, "no such overload")
	}
	f, ok := o.n.fields[string(name)]
	if !ok {
		return nil, types.NewErr("no such key: %s", name)
	}
	return f, nil
}

func (o *object) Get(index ref.Val) ref.Val {
	f, errVal := o.field(index)
	if f == nil {
		return errVal
	}
	v, ok := o.m[f.json]
	if !ok || v == nil {
		return types.NewErr("no such key: %s", index) // null is absent, as in Kubernetes
	}
	return value(v, f.n)
}

func (o *object) IsSet(index ref.Val) ref.Val {
	f, errVal := o.field(index)
	if f == nil {
		return errVal
	}
	v, ok := o.m[f.json]
	return types.Bool(ok && v != nil)
}

// Equal compares two objects of one type member by member, undeclared
// members (kept by x-kubernetes-preserve-unknown-fields) included.
func (o *object) Equal(other ref.Val) ref.Val {
	p, ok := other.(*object)
	if !ok || p.n.typ.TypeName() != o.n.typ.TypeName() || len(o.m) != len(p.m) {
		return types.False
	}
	declared := make(map[string]*node, len(o.n.order))
	for _, f := range o.n.order {
		declared[f.json] = f.n
	}
	for k, a := range o.m {
		b, ok := p.m[k]
		if !ok {
			return types.False
		}
		if n, ok := declared[k]; ok {
			if value(a, n).Equal(value(b, n)) != types.True {
				return types.False
			}
		} else if !meta.DeepEqual(a, b) {
			return types.False
		}
	}
	return types.True
}

func (o *object) ConvertToNative(t reflect.Type) (any, error) {
	if reflect.TypeOf(o.m).AssignableTo(t) {
		return o.m, nil
	}
	return nil, fmt.Errorf("type conversion error from %s to %v", o.n.typ, t)
}

func (o *object) ConvertToType(t ref.Type) ref.Val {
	if t == types.TypeType {
		return o.n.typ
	}
	if t.TypeName() == o.n.typ.TypeName() {
		return o
	}
	return types.NewErr("type conversion error from %s to %s", o.n.typ, t)
}

func (o *object) Type() ref.Type { return o.n.typ }
func (o *object) Value() any     { return o.m }

// list is a JSON array; lists of x-kubernetes-list-type set compare as
// sets and of type map as maps by their keys, as Kubernetes compares them.
type list struct {
	traits.Lister
	n     *node
	items []any
}

func (l *list) Equal(other ref.Val) ref.Val {
	o, ok := other.(*list)
	if !ok || l.n.s.ListType() == schema.ListTypeAtomic {
		return l.Lister.Equal(other)
	}
	if len(l.items) != len(o.items) {
		return types.False
	}
	for _, a := range l.items {
		found := false
		for _, b := range o.items {
			if l.sameElement(a, b) {
				found = value(a, l.n.elem).Equal(value(b, l.n.elem)) == types.True
				break
			}
		}
		if !found {
			return types.False
		}
	}
	return types.True
}

// sameElement reports whether a and b are the same element of a set (equal)
// or of a map list (equal keys).
func (l *list) sameElement(a, b any) bool {
	if l.n.s.ListType() == schema.ListTypeSet {
		return value(a, l.n.elem).Equal(value(b, l.n.elem)) == types.True
	}
	am, _ := a.(map[string]any)
	bm, _ := b.(map[string]any)
	for _, k := range l.n.s.ListMapKeys() {
		if dynValue(am[k]).Equal(dynValue(bm[k])) != types.True {
			return false
		}
	}
	return true
}
