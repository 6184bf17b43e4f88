package library

import (
	"fmt"

	"github.com/google/cel-go/cel"
	"github.com/google/cel-go/common/types"
	"github.com/google/cel-go/common/types/ref"
	"github.com/google/cel-go/common/types/traits"
)

// The Kubernetes list library, at the version 1.36 enables (the includes
// function came in 1.37):
//
//	<list<T>>.isSorted() <bool>           T comparable
//	<list<T>>.sum() <T>                   T int, uint, double or duration
//	<list<T>>.min() <T>, .max() <T>       T comparable; error on an empty list
//	<list<T>>.indexOf(<T>) <int>          -1 when absent
//	<list<T>>.lastIndexOf(<T>) <int>
//
// Examples: [1, 2, 3].isSorted() == true, [1, 3].sum() == 4,
// ['1m', '1s'] of durations sum to duration('1m1s'), [1, 3].max() == 3,
// [1, 2, 2, 3].indexOf(2) == 1, ['a', 'b', 'b', 'c'].lastIndexOf('b') == 2.

// namedType is a CEL type with the name its overload ids use.
type namedType struct {
	name string
	t    *cel.Type
}

// comparableTypes are the element types of isSorted, min and max, in
// Kubernetes' overload order.
var comparableTypes = []namedType{
	{"int", cel.IntType}, {"uint", cel.UintType}, {"double", cel.DoubleType},
	{"bool", cel.BoolType}, {"duration", cel.DurationType},
	{"timestamp", cel.TimestampType}, {"string", cel.StringType},
	{"bytes", cel.BytesType},
}

// summableTypes are the element types of sum.
var summableTypes = []namedType{
	{"int", cel.IntType}, {"uint", cel.UintType}, {"double", cel.DoubleType},
	{"duration", cel.DurationType},
}

func listsLib() *library {
	elem := cel.TypeParamType("A")
	return &library{name: "kubernetes.lists", options: []cel.EnvOption{
		cel.Function("isSorted", perType(comparableTypes, func(n namedType) cel.FunctionOpt {
			return cel.MemberOverload(fmt.Sprintf("list_%s_is_sorted_bool", n.name),
				[]*cel.Type{cel.ListType(n.t)}, cel.BoolType, cel.UnaryBinding(isSorted))
		})...),
		cel.Function("sum", perType(summableTypes, func(n namedType) cel.FunctionOpt {
			zero := zeroOf(n.name)
			return cel.MemberOverload(fmt.Sprintf("list_%s_sum_%s", n.name, n.name),
				[]*cel.Type{cel.ListType(n.t)}, n.t,
				cel.UnaryBinding(func(l ref.Val) ref.Val { return sum(l, zero) }))
		})...),
		cel.Function("max", perType(comparableTypes, func(n namedType) cel.FunctionOpt {
			return cel.MemberOverload(fmt.Sprintf("list_%s_max_%s", n.name, n.name),
				[]*cel.Type{cel.ListType(n.t)}, n.t,
				cel.UnaryBinding(func(l ref.Val) ref.Val { return extreme(l, "max", types.IntNegOne) }))
		})...),
		cel.Function("min", perType(comparableTypes, func(n namedType) cel.FunctionOpt {
			return cel.MemberOverload(fmt.Sprintf("list_%s_min_%s", n.name, n.name),
				[]*cel.Type{cel.ListType(n.t)}, n.t,
				cel.UnaryBinding(func(l ref.Val) ref.Val { return extreme(l, "min", types.IntOne) }))
		})...),
		cel.Function("indexOf", cel.MemberOverload("list_a_index_of_int",
			[]*cel.Type{cel.ListType(elem), elem}, cel.IntType, cel.BinaryBinding(indexOf))),
		cel.Function("lastIndexOf", cel.MemberOverload("list_a_last_index_of_int",
			[]*cel.Type{cel.ListType(elem), elem}, cel.IntType, cel.BinaryBinding(lastIndexOf))),
	}}
}

// perType builds one overload per element type.
func perType(ts []namedType, overload func(namedType) cel.FunctionOpt) []cel.FunctionOpt {
	out := make([]cel.FunctionOpt, len(ts))
	for i, t := range ts {
		out[i] = overload(t)
	}
	return out
}

// zeroOf is the sum of an empty list of the named type.
func zeroOf(name string) ref.Val {
	switch name {
	case "uint":
		return types.Uint(0)
	case "double":
		return types.Double(0)
	case "duration":
		return types.Duration{}
	}
	return types.Int(0)
}

// isSorted reports whether no element compares greater than its successor.
func isSorted(list ref.Val) ref.Val {
	it, ok := list.(traits.Iterable)
	if !ok {
		return noSuchOverload(list)
	}
	var prev traits.Comparer
	for i := it.Iterator(); i.HasNext() == types.True; {
		next := i.Next()
		c, ok := next.(traits.Comparer)
		if !ok {
			return noSuchOverload(next)
		}
		if prev != nil && prev.Compare(next) == types.IntOne {
			return types.False
		}
		prev = c
	}
	return types.True
}

// sum adds the elements to zero, stopping at the first error (an overflow).
func sum(list ref.Val, zero ref.Val) ref.Val {
	it, ok := list.(traits.Iterable)
	if !ok {
		return noSuchOverload(list)
	}
	acc := zero
	for i := it.Iterator(); i.HasNext() == types.True; {
		adder, ok := acc.(traits.Adder)
		if !ok {
			return noSuchOverload(acc)
		}
		acc = adder.Add(i.Next())
	}
	return acc
}

// extreme returns the element every other compares to with other than
// prefer (the smallest for min, the largest for max); the first of equals
// wins.
func extreme(list ref.Val, name string, prefer ref.Val) ref.Val {
	it, ok := list.(traits.Iterable)
	if !ok {
		return noSuchOverload(list)
	}
	var result traits.Comparer
	for i := it.Iterator(); i.HasNext() == types.True; {
		next := i.Next()
		c, ok := next.(traits.Comparer)
		if !ok {
			return noSuchOverload(next)
		}
		if result == nil || result.Compare(next) == prefer {
			result = c
		}
	}
	if result == nil {
		return types.NewErr("%s called on empty list", name)
	}
	return result.(ref.Val)
}

func indexOf(list, item ref.Val) ref.Val {
	l, ok := list.(traits.Lister)
	if !ok {
		return noSuchOverload(list)
	}
	n := l.Size().(types.Int)
	for i := types.Int(0); i < n; i++ {
		if l.Get(i).Equal(item) == types.True {
			return i
		}
	}
	return types.Int(-1)
}

func lastIndexOf(list, item ref.Val) ref.Val {
	l, ok := list.(traits.Lister)
	if !ok {
		return noSuchOverload(list)
	}
	for i := l.Size().(types.Int) - 1; i >= 0; i-- {
		if l.Get(i).Equal(item) == types.True {
			return i
		}
	}
	return types.Int(-1)
}
