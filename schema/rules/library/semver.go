package library

import (
	"errors"
	"fmt"
	"reflect"
	"strconv"
	"strings"

	"github.com/google/cel-go/cel"
	"github.com/google/cel-go/common/types"
	"github.com/google/cel-go/common/types/ref"
)

// The Kubernetes semver library (version 1, with normalization), over
// Semantic Versioning 2.0.0 as github.com/blang/semver/v4 parses it, whose
// error messages Kubernetes passes on:
//
//	semver(<string>[, <bool> normalize]) <Semver>
//	isSemver(<string>[, <bool> normalize]) <bool>
//	<Semver>.major(), .minor(), .patch() <int>
//	<Semver>.isGreaterThan(<Semver>), .isLessThan(<Semver>) <bool>
//	<Semver>.compareTo(<Semver>) <int>
//
// Normalization drops a leading "v", fills in a missing minor or patch
// number and strips leading zeros: semver('v01.1', true) == semver('1.1.0').
// Build metadata does not take part in comparisons.

// semverType is the CEL type of semver() values.
var semverType = cel.ObjectType("kubernetes.Semver")

const (
	semverNumbers  = "0123456789"
	semverAlphanum = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ-" + semverNumbers
)

// semverValue is a parsed semantic version.
type semverValue struct {
	major, minor, patch uint64
	pre                 []prerelease
	build               []string
}

// prerelease is one dot-separated prerelease identifier.
type prerelease struct {
	str   string
	num   uint64
	isNum bool
}

// ConvertToNative implements ref.Val: to the version or its string.
func (v semverValue) ConvertToNative(t reflect.Type) (any, error) {
	return toNative(v, v.String, "Semver", t)
}

// ConvertToType implements ref.Val.
func (v semverValue) ConvertToType(t ref.Type) ref.Val { return convertOpaque(v, semverType, t) }

// Equal implements ref.Val: versions are equal when they compare equal.
func (v semverValue) Equal(o ref.Val) ref.Val {
	return equalAs(o, func(ov semverValue) bool { return v.compare(ov) == 0 })
}

// Type implements ref.Val.
func (v semverValue) Type() ref.Type { return semverType }

// Value implements ref.Val.
func (v semverValue) Value() any { return v }

// String prints the version in semver syntax.
func (v semverValue) String() string {
	s := fmt.Sprintf("%d.%d.%d", v.major, v.minor, v.patch)
	pre := make([]string, len(v.pre))
	for i, p := range v.pre {
		pre[i] = p.str
		if p.isNum {
			pre[i] = strconv.FormatUint(p.num, 10)
		}
	}
	if len(pre) > 0 {
		s += "-" + strings.Join(pre, ".")
	}
	if len(v.build) > 0 {
		s += "+" + strings.Join(v.build, ".")
	}
	return s
}

func semverLib() *library {
	s := semverType
	number := func(name string, get func(semverValue) uint64) cel.EnvOption {
		return cel.Function(name, cel.MemberOverload("semver_"+name, []*cel.Type{s}, cel.IntType,
			unary(func(v semverValue) ref.Val { return types.Int(get(v)) })))
	}
	compare := func(name, id string, out *cel.Type, result func(int) ref.Val) cel.EnvOption {
		return cel.Function(name, cel.MemberOverload(id, []*cel.Type{s, s}, out,
			binary(func(x, y semverValue) ref.Val { return result(x.compare(y)) })))
	}
	return &library{name: "kubernetes.Semver", options: []cel.EnvOption{
		cel.Function("semver",
			cel.Overload("string_to_semver", []*cel.Type{cel.StringType}, s,
				cel.UnaryBinding(func(a ref.Val) ref.Val { return toSemver(a, types.False) })),
			cel.Overload("string_bool_to_semver", []*cel.Type{cel.StringType, cel.BoolType}, s,
				cel.BinaryBinding(toSemver))),
		cel.Function("isSemver",
			cel.Overload("is_semver_string", []*cel.Type{cel.StringType}, cel.BoolType,
				cel.UnaryBinding(func(a ref.Val) ref.Val { return isSemver(a, types.False) })),
			cel.Overload("is_semver_string_bool", []*cel.Type{cel.StringType, cel.BoolType}, cel.BoolType,
				cel.BinaryBinding(isSemver))),
		number("major", func(v semverValue) uint64 { return v.major }),
		number("minor", func(v semverValue) uint64 { return v.minor }),
		number("patch", func(v semverValue) uint64 { return v.patch }),
		compare("isGreaterThan", "semver_is_greater_than", cel.BoolType, func(c int) ref.Val { return types.Bool(c == 1) }),
		compare("isLessThan", "semver_is_less_than", cel.BoolType, func(c int) ref.Val { return types.Bool(c == -1) }),
		compare("compareTo", "semver_compare_to", cel.IntType, func(c int) ref.Val { return types.Int(c) }),
	}}
}

// parseSemverArgs parses the string argument, normalizing it if asked.
func parseSemverArgs(str, normalize ref.Val) (semverValue, ref.Val, error) {
	s, ok := str.Value().(string)
	if !ok {
		return semverValue{}, noSuchOverload(str), nil
	}
	n, ok := normalize.Value().(bool)
	if !ok {
		return semverValue{}, noSuchOverload(str), nil
	}
	if n {
		v, err := normalizeAndParseSemver(s)
		return v, nil, err
	}
	v, err := parseSemver(s)
	return v, nil, err
}

func toSemver(str, normalize ref.Val) ref.Val {
	v, bad, err := parseSemverArgs(str, normalize)
	switch {
	case bad != nil:
		return bad
	case err != nil:
		return types.WrapErr(err)
	}
	return v
}

func isSemver(str, normalize ref.Val) ref.Val {
	_, bad, err := parseSemverArgs(str, normalize)
	if bad != nil {
		return bad
	}
	return types.Bool(err == nil)
}

// normalizeAndParseSemver drops a leading "v", strips leading zeros from
// the dot-separated parts and fills in missing minor and patch numbers, as
// Kubernetes does (semver.ParseTolerant without its whitespace trimming).
func normalizeAndParseSemver(s string) (semverValue, error) {
	parts := strings.SplitN(strings.TrimPrefix(s, "v"), ".", 3)
	for i, p := range parts {
		if len(p) > 1 {
			p = strings.TrimLeft(p, "0")
			if p == "" || !strings.ContainsAny(p[:1], semverNumbers) {
				p = "0" + p
			}
			parts[i] = p
		}
	}
	if len(parts) < 3 {
		if strings.ContainsAny(parts[len(parts)-1], "+-") {
			return semverValue{}, errors.New("short version cannot contain PreRelease/Build meta data")
		}
		for len(parts) < 3 {
			parts = append(parts, "0")
		}
	}
	return parseSemver(strings.Join(parts, "."))
}
