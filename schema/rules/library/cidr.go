package library

import (
	"fmt"
	"net/netip"

	"github.com/google/cel-go/cel"
	"github.com/google/cel-go/common/types"
	"github.com/google/cel-go/common/types/ref"
)

// The Kubernetes CIDR library. cidr() takes an IPv4 or IPv6 prefix and
// refuses IPv4-mapped IPv6 prefixes; as in Kubernetes (whatever its
// documentation says) host bits after the prefix are accepted and kept:
//
//	cidr(<string>) <CIDR>, isCIDR(<string>) <bool>, string(<CIDR>) <string>
//	<CIDR>.containsIP(<IP|string>), .containsCIDR(<CIDR|string>) <bool>
//	<CIDR>.ip() <IP>, .masked() <CIDR>, .prefixLength() <int>
//
// Examples: cidr('192.168.0.0/24').containsIP('192.168.0.1'),
// cidr('192.168.0.0/16').containsCIDR('192.168.10.0/24'),
// cidr('192.168.0.1/24').masked() == cidr('192.168.0.0/24'),
// cidr('::1/128').prefixLength() == 128, cidr('192.168.0.0/33') is an error.

// cidrType is the CEL type of cidr() values.
var cidrType = cel.OpaqueType("net.CIDR")

func cidrLib() *library {
	c := cidrType
	return &library{name: "kubernetes.net.cidr", options: []cel.EnvOption{
		cel.Types(cidrType),
		cel.Function("cidr", cel.Overload("string_to_cidr", []*cel.Type{cel.StringType}, c,
			onString(stringToCIDR))),
		cel.Function("isCIDR", cel.Overload("is_cidr", []*cel.Type{cel.StringType}, cel.BoolType,
			onString(func(s string) ref.Val { _, err := parseCIDR(s); return types.Bool(err == nil) }))),
		cel.Function("string", cel.Overload("cidr_to_string", []*cel.Type{c}, cel.StringType,
			unary(func(v cidrValue) ref.Val { return types.String(v.v.String()) }))),
		cel.Function("containsIP",
			cel.MemberOverload("cidr_contains_ip_string", []*cel.Type{c, cel.StringType}, cel.BoolType,
				binary(func(n cidrValue, s types.String) ref.Val { return containsIP(n, stringToIP(string(s))) })),
			cel.MemberOverload("cidr_contains_ip_ip", []*cel.Type{c, ipType}, cel.BoolType,
				binary(containsIP))),
		cel.Function("containsCIDR",
			cel.MemberOverload("cidr_contains_cidr_string", []*cel.Type{c, cel.StringType}, cel.BoolType,
				binary(func(n cidrValue, s types.String) ref.Val { return containsCIDR(n, stringToCIDR(string(s))) })),
			cel.MemberOverload("cidr_contains_cidr", []*cel.Type{c, c}, cel.BoolType,
				binary(containsCIDR))),
		cel.Function("ip", cel.MemberOverload("cidr_ip", []*cel.Type{c}, ipType,
			unary(func(v cidrValue) ref.Val { return ipValue{v: v.v.Addr()} }))),
		cel.Function("prefixLength", cel.MemberOverload("cidr_prefix_length", []*cel.Type{c}, cel.IntType,
			unary(func(v cidrValue) ref.Val { return types.Int(v.v.Bits()) }))),
		cel.Function("masked", cel.MemberOverload("cidr_masked", []*cel.Type{c}, c,
			unary(func(v cidrValue) ref.Val { return cidrValue{v: v.v.Masked()} }))),
	}}
}

// containsIP reports whether the network holds the address. As in
// Kubernetes, an invalid address string yields "no such overload" rather
// than its parse error.
func containsIP(n cidrValue, addr ref.Val) ref.Val {
	a, ok := addr.(ipValue)
	if !ok {
		return types.NoSuchOverloadErr()
	}
	return types.Bool(n.v.Contains(a.v))
}

// containsCIDR reports whether the network holds the whole other network;
// the parse error of an invalid network string passes through.
func containsCIDR(n cidrValue, other ref.Val) ref.Val {
	o, ok := other.(cidrValue)
	if !ok {
		return noSuchOverload(other)
	}
	return types.Bool(n.v.Overlaps(o.v) && n.v.Bits() <= o.v.Bits())
}

func stringToCIDR(s string) ref.Val {
	p, err := parseCIDR(s)
	if err != nil {
		return types.NewErr("network address parse error during conversion from string: %v", err)
	}
	return cidrValue{v: p}
}

// parseCIDR parses a prefix as Kubernetes' cidr() does. Its parse error
// repeats the "network address parse error" lead-in when cidr() wraps it,
// as Kubernetes' does.
func parseCIDR(s string) (netip.Prefix, error) {
	p, err := netip.ParsePrefix(s)
	if err != nil {
		return netip.Prefix{}, fmt.Errorf("network address parse error during conversion from string: %v", err)
	}
	if p.Addr().Is4In6() {
		return netip.Prefix{}, fmt.Errorf("IPv4-mapped IPv6 address %q is not allowed", s)
	}
	return p, nil
}
