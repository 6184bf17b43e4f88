package library

import (
	"regexp"

	"github.com/google/cel-go/cel"
	"github.com/google/cel-go/common/types"
	"github.com/google/cel-go/common/types/ref"
	"github.com/google/cel-go/interpreter"
)

// The Kubernetes regex library, beside the standard matches():
//
//	<string>.find(<string>) <string>                  first match, '' if none
//	<string>.findAll(<string>) <list<string>>         all matches
//	<string>.findAll(<string>, <int>) <list<string>>  at most n (n < 0: all)
//
// Examples: "abc 123".find('[0-9]+') == '123',
// "123 abc 456".findAll('[0-9]+', 1) == ['123'].
//
// A constant pattern is compiled once, when the program is built, so a bad
// literal pattern fails program creation as in Kubernetes; a computed one is
// compiled per call and fails with "Illegal regex: ...".

func regexLib() *library {
	return &library{
		name: "kubernetes.regex",
		options: []cel.EnvOption{
			cel.Function("find", cel.MemberOverload("string_find_string",
				[]*cel.Type{cel.StringType, cel.StringType}, cel.StringType,
				cel.BinaryBinding(func(s, re ref.Val) ref.Val { return compileAndFind(s, re, nil) }))),
			cel.Function("findAll",
				cel.MemberOverload("string_find_all_string",
					[]*cel.Type{cel.StringType, cel.StringType}, cel.ListType(cel.StringType),
					cel.BinaryBinding(func(s, re ref.Val) ref.Val { return compileAndFind(s, re, types.Int(-1)) })),
				cel.MemberOverload("string_find_all_string_int",
					[]*cel.Type{cel.StringType, cel.StringType, cel.IntType}, cel.ListType(cel.StringType),
					cel.FunctionBinding(func(args ...ref.Val) ref.Val { return compileAndFind(args[0], args[1], args[2]) }))),
		},
		programs: []cel.ProgramOption{cel.OptimizeRegex(
			&interpreter.RegexOptimization{Function: "find", RegexIndex: 1, Factory: precompiled},
			&interpreter.RegexOptimization{Function: "findAll", RegexIndex: 1, Factory: precompiled},
		)},
	}
}

// compileAndFind compiles the pattern for this call and runs find (limit
// nil) or findAll.
func compileAndFind(str, pattern, limit ref.Val) ref.Val {
	p, ok := pattern.Value().(string)
	if !ok {
		return noSuchOverload(pattern)
	}
	re, err := regexp.Compile(p)
	if err != nil {
		return types.NewErr("Illegal regex: %v", err.Error())
	}
	return find(re, str, limit)
}

// find returns the first match of re in str when limit is nil, else the
// list of at most limit matches (all if limit < 0).
func find(re *regexp.Regexp, str, limit ref.Val) ref.Val {
	s, ok := str.Value().(string)
	if !ok {
		return noSuchOverload(str)
	}
	if limit == nil {
		return types.String(re.FindString(s))
	}
	n, ok := limit.Value().(int64)
	if !ok {
		return noSuchOverload(limit)
	}
	return types.NewStringList(types.DefaultTypeAdapter, re.FindAllString(s, int(n)))
}

// precompiled replaces a find or findAll call whose pattern is a constant
// with one using the pattern compiled once; a bad pattern fails here.
func precompiled(call interpreter.InterpretableCall, pattern string) (interpreter.InterpretableCall, error) {
	re, err := regexp.Compile(pattern)
	if err != nil {
		return nil, err
	}
	first := call.Function() == "find"
	return interpreter.NewCall(call.ID(), call.Function(), call.OverloadID(), call.Args(),
		func(args ...ref.Val) ref.Val {
			switch {
			case first && len(args) == 2:
				return find(re, args[0], nil)
			case !first && len(args) == 2:
				return find(re, args[0], types.Int(-1))
			case !first && len(args) == 3:
				return find(re, args[0], args[2])
			}
			return types.NoSuchOverloadErr()
		}), nil
}
