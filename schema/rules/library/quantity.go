package library

import (
	"errors"
	"reflect"

	"github.com/google/cel-go/cel"
	"github.com/google/cel-go/common/types"
	"github.com/google/cel-go/common/types/ref"
)

// The Kubernetes quantity library, over resource quantities as Kubernetes
// parses them (1.5G, 200k, 20Mi, 1e3, 100m; see quantityparse.go):
//
//	quantity(<string>) <Quantity>, isQuantity(<string>) <bool>
//	sign(<Quantity>) <int>        a global function in Kubernetes, not a member
//	<Quantity>.isGreaterThan(<Quantity>), .isLessThan(<Quantity>) <bool>
//	<Quantity>.compareTo(<Quantity>) <int>
//	<Quantity>.add(<Quantity|int>), .sub(<Quantity|int>) <Quantity>
//	<Quantity>.asInteger() <int>, .isInteger() <bool>
//	<Quantity>.asApproximateFloat() <double>
//
// Examples: quantity("200M").compareTo(quantity("0.2G")) == 0,
// quantity("50k").add(20).sub(quantity("100k")).sub(-50000) == quantity("20"),
// quantity("9999999999999999999999999999999999999G").asInteger() fails with
// "cannot convert value to integer".

// quantityType is the CEL type of quantity() values.
var quantityType = cel.ObjectType("kubernetes.Quantity")

// errNotInteger is asInteger's error, Kubernetes' wording.
var errNotInteger = errors.New("cannot convert value to integer")

// ConvertToNative implements ref.Val: to the quantity or its canonical
// string.
func (q quantity) ConvertToNative(t reflect.Type) (any, error) {
	return toNative(q, q.String, "Quantity", t)
}

// ConvertToType implements ref.Val.
func (q quantity) ConvertToType(t ref.Type) ref.Val { return convertOpaque(q, quantityType, t) }

// Equal implements ref.Val: quantities are equal when their values are.
func (q quantity) Equal(o ref.Val) ref.Val {
	return equalAs(o, func(oq quantity) bool { return q.Cmp(oq) == 0 })
}

// Type implements ref.Val.
func (q quantity) Type() ref.Type { return quantityType }

// Value implements ref.Val.
func (q quantity) Value() any { return q }

func quantityLib() *library {
	q := quantityType
	return &library{name: "kubernetes.quantity", options: []cel.EnvOption{
		cel.Function("quantity", cel.Overload("string_to_quantity", []*cel.Type{cel.StringType}, q,
			onString(stringToQuantity))),
		cel.Function("isQuantity", cel.Overload("is_quantity_string", []*cel.Type{cel.StringType}, cel.BoolType,
			onString(func(s string) ref.Val { _, err := parseQuantity(s); return types.Bool(err == nil) }))),
		cel.Function("sign", cel.Overload("quantity_sign", []*cel.Type{q}, cel.IntType,
			unary(func(x quantity) ref.Val { return types.Int(x.Sign()) }))),
		cel.Function("isGreaterThan", cel.MemberOverload("quantity_is_greater_than", []*cel.Type{q, q}, cel.BoolType,
			binary(func(x, y quantity) ref.Val { return types.Bool(x.Cmp(y) == 1) }))),
		cel.Function("isLessThan", cel.MemberOverload("quantity_is_less_than", []*cel.Type{q, q}, cel.BoolType,
			binary(func(x, y quantity) ref.Val { return types.Bool(x.Cmp(y) == -1) }))),
		cel.Function("compareTo", cel.MemberOverload("quantity_compare_to", []*cel.Type{q, q}, cel.IntType,
			binary(func(x, y quantity) ref.Val { return types.Int(x.Cmp(y)) }))),
		cel.Function("asApproximateFloat", cel.MemberOverload("quantity_get_float", []*cel.Type{q}, cel.DoubleType,
			unary(func(x quantity) ref.Val { return types.Double(x.AsApproximateFloat64()) }))),
		cel.Function("asInteger", cel.MemberOverload("quantity_get_int", []*cel.Type{q}, cel.IntType,
			unary(asInteger))),
		cel.Function("isInteger", cel.MemberOverload("quantity_is_integer", []*cel.Type{q}, cel.BoolType,
			unary(func(x quantity) ref.Val { _, ok := x.AsInt64(); return types.Bool(ok) }))),
		cel.Function("add",
			cel.MemberOverload("quantity_add", []*cel.Type{q, q}, q, binary(addQuantity)),
			cel.MemberOverload("quantity_add_int", []*cel.Type{q, cel.IntType}, q, withInt(addQuantity))),
		cel.Function("sub",
			cel.MemberOverload("quantity_sub", []*cel.Type{q, q}, q, binary(subQuantity)),
			cel.MemberOverload("quantity_sub_int", []*cel.Type{q, cel.IntType}, q, withInt(subQuantity))),
	}}
}

// withInt binds an operation on a quantity and an integer, the integer
// taken as a quantity in DecimalExponent format.
func withInt(f func(x, y quantity) ref.Val) cel.OverloadOpt {
	return binary(func(x quantity, n types.Int) ref.Val { return f(x, newIntQuantity(int64(n))) })
}

func stringToQuantity(s string) ref.Val {
	return quantityOrErr(parseQuantity(s))
}

func asInteger(q quantity) ref.Val {
	n, ok := q.AsInt64()
	if !ok {
		return types.WrapErr(errNotInteger)
	}
	return types.Int(n)
}

func addQuantity(x, y quantity) ref.Val { return quantityOrErr(x.Add(y)) }

func subQuantity(x, y quantity) ref.Val { return quantityOrErr(x.Sub(y)) }

func quantityOrErr(q quantity, err error) ref.Val {
	if err != nil {
		return types.WrapErr(err)
	}
	return q
}
