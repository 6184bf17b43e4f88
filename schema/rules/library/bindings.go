package library

import (
	"fmt"
	"reflect"

	"github.com/google/cel-go/cel"
	"github.com/google/cel-go/common/types"
	"github.com/google/cel-go/common/types/ref"
)

// Helpers shared by the libraries' bindings and value types.

// unary binds a function of one argument of Go type T (a library value
// type, or types.String and the like); any other argument yields "no such
// overload", or passes through if it is already an error.
func unary[T ref.Val](f func(T) ref.Val) cel.OverloadOpt {
	return cel.UnaryBinding(func(v ref.Val) ref.Val {
		x, ok := v.(T)
		if !ok {
			return noSuchOverload(v)
		}
		return f(x)
	})
}

// binary binds a function of two arguments of Go types T and U.
func binary[T, U ref.Val](f func(T, U) ref.Val) cel.OverloadOpt {
	return cel.BinaryBinding(func(a, b ref.Val) ref.Val {
		x, ok := a.(T)
		if !ok {
			return noSuchOverload(a)
		}
		y, ok := b.(U)
		if !ok {
			return noSuchOverload(b)
		}
		return f(x, y)
	})
}

// onString binds a function of one string argument.
func onString(f func(string) ref.Val) cel.OverloadOpt {
	return unary(func(s types.String) ref.Val { return f(string(s)) })
}

// noSuchOverload is the error of a binding called with values its overload
// does not accept (or the value itself, if it is already an error).
func noSuchOverload(v ref.Val) ref.Val {
	return types.MaybeNoSuchOverloadErr(v)
}

// equalAs is the Equal of a library value type: other values of the same
// type compare with same, anything else is "no such overload".
func equalAs[T ref.Val](o ref.Val, same func(T) bool) ref.Val {
	x, ok := o.(T)
	if !ok {
		return noSuchOverload(o)
	}
	return types.Bool(same(x))
}

// toNative is the ConvertToNative of a library value type: the Go value
// itself, or its string form.
func toNative(native any, str func() string, name string, t reflect.Type) (any, error) {
	switch {
	case reflect.TypeOf(native).AssignableTo(t):
		return native, nil
	case reflect.TypeOf("").AssignableTo(t):
		return str(), nil
	}
	return nil, fmt.Errorf("type conversion error from '%s' to '%v'", name, t)
}

// convertOpaque is the ConvertToType of the library's value types: a value
// converts to its own type and to type (its type value) only.
func convertOpaque(v ref.Val, own *cel.Type, to ref.Type) ref.Val {
	switch to {
	case own:
		return v
	case types.TypeType:
		return own
	}
	return types.NewErr("type conversion error from '%s' to '%s'", own, to)
}
