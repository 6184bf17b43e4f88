package library

import (
	"fmt"
	"net/netip"
	"reflect"

	"github.com/google/cel-go/cel"
	"github.com/google/cel-go/common/types"
	"github.com/google/cel-go/common/types/ref"
)

// The Kubernetes IP address library. ip() takes an IPv4 or IPv6 address
// and refuses leading zeros in IPv4 octets, IPv4-mapped IPv6 addresses
// (::ffff:1.2.3.4) and zones (fe80::1%eth0):
//
//	ip(<string>) <IP>, isIP(<string>) <bool>, string(<IP>) <string>
//	ip.isCanonical(<string>) <bool>   a global function on the string
//	<IP>.family() <int>               4 or 6
//	<IP>.isUnspecified(), .isLoopback(), .isLinkLocalMulticast(),
//	.isLinkLocalUnicast(), .isGlobalUnicast() <bool>
//
// Examples: ip('127.0.0.1').family() == 4, ip('::1').isLoopback(),
// ip.isCanonical('2001:DB8::ABCD') == false (the canonical form is
// lowercase), ip('127.0.0.256') is an error.

// ipType is the CEL type of ip() values.
var ipType = cel.OpaqueType("net.IP")

// netValue is an IP address or a network as a CEL value.
type netValue[T interface {
	netip.Addr | netip.Prefix
	String() string
}] struct{ v T }

// ipValue and cidrValue are the values of ip() and cidr().
type (
	ipValue   = netValue[netip.Addr]
	cidrValue = netValue[netip.Prefix]
)

// ConvertToNative implements ref.Val: to the netip value or its string.
func (n netValue[T]) ConvertToNative(t reflect.Type) (any, error) {
	return toNative(n.v, n.v.String, n.name(), t)
}

// ConvertToType implements ref.Val; addresses and networks also convert
// to their string.
func (n netValue[T]) ConvertToType(t ref.Type) ref.Val {
	if t == types.StringType {
		return types.String(n.v.String())
	}
	return convertOpaque(n, n.celType(), t)
}

// Equal implements ref.Val: the same address (a network's host bits
// included) and prefix length.
func (n netValue[T]) Equal(o ref.Val) ref.Val {
	return equalAs(o, func(on netValue[T]) bool { return n.v == on.v })
}

// Type implements ref.Val.
func (n netValue[T]) Type() ref.Type { return n.celType() }

// Value implements ref.Val.
func (n netValue[T]) Value() any { return n.v }

// Size implements traits.Sizer, which runtime cost accounting reads: the
// address length in bytes, or a network's prefix length in bytes.
func (n netValue[T]) Size() ref.Val {
	switch v := any(n.v).(type) {
	case netip.Addr:
		return types.Int((v.BitLen() + 7) / 8)
	case netip.Prefix:
		return types.Int((v.Bits() + 7) / 8)
	}
	return types.Int(0)
}

func (n netValue[T]) celType() *cel.Type {
	if _, ok := any(n.v).(netip.Addr); ok {
		return ipType
	}
	return cidrType
}

func (n netValue[T]) name() string {
	if _, ok := any(n.v).(netip.Addr); ok {
		return "IP"
	}
	return "CIDR"
}

func ipLib() *library {
	predicate := func(name, id string, is func(netip.Addr) bool) cel.EnvOption {
		return cel.Function(name, cel.MemberOverload(id, []*cel.Type{ipType}, cel.BoolType,
			unary(func(v ipValue) ref.Val { return types.Bool(is(v.v)) })))
	}
	return &library{name: "kubernetes.net.ip", options: []cel.EnvOption{
		cel.Types(ipType),
		cel.Function("ip", cel.Overload("string_to_ip", []*cel.Type{cel.StringType}, ipType,
			onString(stringToIP))),
		cel.Function("isIP", cel.Overload("is_ip", []*cel.Type{cel.StringType}, cel.BoolType,
			onString(func(s string) ref.Val { _, err := parseIP(s); return types.Bool(err == nil) }))),
		cel.Function("ip.isCanonical", cel.Overload("ip_is_canonical", []*cel.Type{cel.StringType}, cel.BoolType,
			onString(ipIsCanonical))),
		cel.Function("string", cel.Overload("ip_to_string", []*cel.Type{ipType}, cel.StringType,
			unary(func(v ipValue) ref.Val { return types.String(v.v.String()) }))),
		cel.Function("family", cel.MemberOverload("ip_family", []*cel.Type{ipType}, cel.IntType,
			unary(family))),
		predicate("isUnspecified", "ip_is_unspecified", netip.Addr.IsUnspecified),
		predicate("isLoopback", "ip_is_loopback", netip.Addr.IsLoopback),
		predicate("isLinkLocalMulticast", "ip_is_link_local_multicast", netip.Addr.IsLinkLocalMulticast),
		predicate("isLinkLocalUnicast", "ip_is_link_local_unicast", netip.Addr.IsLinkLocalUnicast),
		predicate("isGlobalUnicast", "ip_is_global_unicast", netip.Addr.IsGlobalUnicast),
	}}
}

func family(v ipValue) ref.Val {
	a := v.v
	switch {
	case a.Is4():
		return types.Int(4)
	case a.Is6():
		return types.Int(6)
	}
	return types.NewErr("IP address %q is not an IPv4 or IPv6 address", a.String())
}

func stringToIP(s string) ref.Val {
	a, err := parseIP(s)
	if err != nil {
		return types.NewErr("%v", err)
	}
	return ipValue{v: a}
}

// ipIsCanonical reports whether the string is the one canonical spelling of
// its address (what netip prints), so that such fields compare as strings.
func ipIsCanonical(s string) ref.Val {
	ip, ok := stringToIP(s).(ipValue)
	if !ok {
		return stringToIP(s)
	}
	return types.Bool(ip.v.String() == s)
}

// parseIP parses an address as Kubernetes' ip() does, with its messages.
func parseIP(s string) (netip.Addr, error) {
	a, err := netip.ParseAddr(s)
	switch {
	case err != nil:
		return netip.Addr{}, fmt.Errorf("IP Address %q parse error during conversion from string: %v", s, err)
	case a.Zone() != "":
		return netip.Addr{}, fmt.Errorf("IP address %q with zone value is not allowed", s)
	case a.Is4In6():
		return netip.Addr{}, fmt.Errorf("IPv4-mapped IPv6 address %q is not allowed", s)
	}
	return a, nil
}
