package library

import (
	"net/url"
	"reflect"

	"github.com/google/cel-go/cel"
	"github.com/google/cel-go/common/types"
	"github.com/google/cel-go/common/types/ref"
)

// The Kubernetes URL library. url() accepts what Go's url.ParseRequestURI
// accepts (an absolute URI or an absolute path, the OpenAPI "uri" format)
// and keeps url.Parse's reading of it, which places a fragment correctly:
//
//	url(<string>) <URL>, isURL(<string>) <bool>
//	<URL>.getScheme(), .getHost(), .getHostname(), .getPort(),
//	.getEscapedPath() <string>
//	<URL>.getQuery() <map<string, list<string>>>
//
// Examples: url('https://example.com:80/').getHost() == 'example.com:80',
// url('https://[::1]:80/').getHostname() == '::1',
// url('https://example.com/path with spaces/').getEscapedPath() ==
// '/path%20with%20spaces/', url('../relative-path') is an error.

// urlType is the CEL type of url() values.
var urlType = cel.ObjectType("kubernetes.URL")

// urlValue is a parsed URL as a CEL value.
type urlValue struct{ u *url.URL }

// ConvertToNative implements ref.Val: to *url.URL or its string.
func (v urlValue) ConvertToNative(t reflect.Type) (any, error) {
	return toNative(v.u, v.u.String, "URL", t)
}

// ConvertToType implements ref.Val.
func (v urlValue) ConvertToType(t ref.Type) ref.Val { return convertOpaque(v, urlType, t) }

// Equal implements ref.Val: URLs are equal when they print the same.
func (v urlValue) Equal(o ref.Val) ref.Val {
	return equalAs(o, func(ov urlValue) bool { return v.u.String() == ov.u.String() })
}

// Type implements ref.Val.
func (v urlValue) Type() ref.Type { return urlType }

// Value implements ref.Val.
func (v urlValue) Value() any { return v.u }

func urlsLib() *library {
	accessor := func(name, id string, get func(*url.URL) string) cel.EnvOption {
		return cel.Function(name, cel.MemberOverload(id, []*cel.Type{urlType}, cel.StringType,
			unary(func(u urlValue) ref.Val { return types.String(get(u.u)) })))
	}
	return &library{name: "kubernetes.urls", options: []cel.EnvOption{
		cel.Function("url", cel.Overload("string_to_url", []*cel.Type{cel.StringType}, urlType,
			onString(stringToURL))),
		cel.Function("isURL", cel.Overload("is_url_string", []*cel.Type{cel.StringType}, cel.BoolType,
			onString(isURL))),
		accessor("getScheme", "url_get_scheme", func(u *url.URL) string { return u.Scheme }),
		accessor("getHost", "url_get_host", func(u *url.URL) string { return u.Host }),
		accessor("getHostname", "url_get_hostname", (*url.URL).Hostname),
		accessor("getPort", "url_get_port", (*url.URL).Port),
		accessor("getEscapedPath", "url_get_escaped_path", (*url.URL).EscapedPath),
		cel.Function("getQuery", cel.MemberOverload("url_get_query", []*cel.Type{urlType},
			cel.MapType(cel.StringType, cel.ListType(cel.StringType)), unary(getQuery))),
	}}
}

func stringToURL(s string) ref.Val {
	if _, err := url.ParseRequestURI(s); err != nil {
		return types.NewErr("URL parse error during conversion from string: %v", err)
	}
	// ParseRequestURI folds a fragment into the path or query; Parse
	// (which accepts everything ParseRequestURI does) keeps it apart.
	u, err := url.Parse(s)
	if err != nil {
		return types.NewErr("URL parse error during conversion from string: %v", err)
	}
	return urlValue{u: u}
}

func isURL(s string) ref.Val {
	_, err := url.ParseRequestURI(s)
	return types.Bool(err == nil)
}

// getQuery returns the query parameters, unescaped, each key with all of
// its values.
func getQuery(u urlValue) ref.Val {
	m := map[ref.Val]ref.Val{}
	for k, vs := range u.u.Query() {
		m[types.String(k)] = types.NewStringList(types.DefaultTypeAdapter, vs)
	}
	return types.NewRefValMap(types.DefaultTypeAdapter, m)
}
