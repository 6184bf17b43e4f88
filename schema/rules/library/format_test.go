package library

import (
	"strings"
	"testing"
)

func TestFormat(t *testing.T) {
	label := "a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', and must start and end with an alphanumeric character (e.g. 'my-name',  or '123-abc', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?')"
	run(t, []evalCase{
		{expr: `format.dns1123Label().validate("my-label-name") == optional.none()`, want: true},
		{expr: `format.dns1123Subdomain().validate("apiextensions.k8s.io") == optional.none()`, want: true},
		{expr: `format.dns1035Label().validate("my-label-name") == optional.none()`, want: true},
		{expr: `format.qualifiedName().validate("apiextensions.k8s.io/v1beta1") == optional.none()`, want: true},
		{expr: `format.dns1123LabelPrefix().validate("my-label-prefix-") == optional.none()`, want: true},
		{expr: `format.dns1123SubdomainPrefix().validate("mysubdomain.prefix.-") == optional.none()`, want: true},
		{expr: `format.dns1035LabelPrefix().validate("my-label-prefix-") == optional.none()`, want: true},
		{expr: `format.labelValue().validate("my_value") == optional.none()`, want: true},
		{expr: `format.uri().validate("http://example.com") == optional.none()`, want: true},
		{expr: `format.uuid().validate("123e4567-e89b-12d3-a456-426614174000") == optional.none()`, want: true},
		{expr: `format.byte().validate("aGVsbG8=") == optional.none()`, want: true},
		{expr: `format.date().validate("2021-01-01") == optional.none()`, want: true},
		{expr: `format.datetime().validate("2021-01-01T00:00:00Z") == optional.none()`, want: true},
		{expr: `format.named("dns1123Label").hasValue()`, want: true},
		{expr: `format.named("unknown") == optional.none()`, want: true},
		{expr: `format.named("uuid").value() == format.uuid()`, want: true},
		{expr: `format.named("uuid").value() == format.byte()`, want: false},
		{expr: `!format.dns1123Label().validate("my-name").hasValue()`, want: true},
		{expr: `format.dns1123Label().validate("my-name").orValue([]).join("\\n")`, want: ""},
		{expr: `format.dns1123Label().validate("My_Name").value()`, want: []string{label}},
		{expr: `format.dns1123Label().validate("a.b").value()`, want: []string{"must not contain dots"}},
		{expr: `format.dns1123Label().validate("` + strings.Repeat("a", 64) + `").value()[0]`, want: "must be no more than 63 characters"},
		{expr: `format.qualifiedName().validate("a/b/c").value()[0].startsWith("a valid label key must consist of alphanumeric characters")`, want: true},
		{expr: `format.qualifiedName().validate("` + strings.Repeat("a", 64) + `").value()[0]`, want: "name part must be no more than 63 bytes"},
		{expr: `format.qualifiedName().validate("/a").value()`, want: []string{"prefix part must be non-empty"}},
		{expr: `format.labelValue().validate("` + strings.Repeat("a", 64) + `").value()[0]`, want: "must be no more than 63 bytes"},
		{expr: `format.uri().validate("not a uri").value()`, want: []string{`parse "not a uri": invalid URI for request`}},
		{expr: `format.uuid().validate("not-a-uuid").value()`, want: []string{"does not match the UUID format"}},
		{expr: `format.byte().validate("ZWxpemFiZXRocG9zZXk").value()`, want: []string{"invalid base64"}},
		{expr: `format.date().validate("2021-13-01").value()`, want: []string{"invalid date"}},
		{expr: `format.datetime().validate("2021-01-01T24:00:00Z").value()`, want: []string{"invalid datetime"}},
		{expr: `format.named(1)`, compileErr: `found no matching overload for 'format.named'`},
	})
}

// TestPrefixMask checks Kubernetes' generateName masking: the trailing
// dash and the character before it become one 'a'.
func TestPrefixMask(t *testing.T) {
	rule := asPrefix(func(s string) []string { return []string{s} })
	for in, want := range map[string]string{"abc-": "aba", "a-": "a", "-": "-", "ab": "ab", ".-": "a"} {
		if got := rule(in)[0]; got != want {
			t.Errorf("masked %q = %q, want %q", in, got, want)
		}
	}
}
