package library

import (
	"fmt"
	"net/url"
	"reflect"
	"regexp"
	"strings"
	"time"

	"github.com/google/cel-go/cel"
	"github.com/google/cel-go/common/types"
	"github.com/google/cel-go/common/types/ref"

	"github.com/kapi-dev/kapi/meta"
)

// The Kubernetes format library: named string formats whose validate
// returns optional.none() for a valid string and otherwise an optional list
// of Kubernetes' error messages, meant for messageExpression:
//
//	format.named(<string>) <optional<Format>>   none for an unknown name
//	format.dns1123Label() <Format>, and one such function per format
//	<Format>.validate(<string>) <optional<list<string>>>
//
// Examples: format.dns1123Label().validate('my-name') == optional.none(),
// format.named('uuid').value().validate('x').value() ==
// ['does not match the UUID format'].

// formatType is the CEL type of formats.
var formatType = cel.ObjectType("kubernetes.NamedFormat")

// Cost-estimation sizes Kubernetes assigns the formats: the estimate of a
// validate call assumes the longest pattern (maxFormatRegexSize), the
// runtime cost the format's own.
const (
	maxFormatRegexSize = 128
	// maxFormatSize bounds the cost of comparing two formats with ==.
	maxFormatSize = 64
)

// Patterns of kube-openapi's strfmt that Kubernetes validates uuid, byte
// and datetime strings with (their lengths also size the cost).
const (
	uuidPattern     = `(?i)^[0-9a-f]{8}-?[0-9a-f]{4}-?[0-9a-f]{4}-?[0-9a-f]{4}-?[0-9a-f]{12}$`
	base64Pattern   = `^(?:[A-Za-z0-9+\/]{4})*(?:[A-Za-z0-9+\/]{2}==|[A-Za-z0-9+\/]{3}=|[A-Za-z0-9+\/]{4})$`
	timePattern     = `^([0-9]{2}):([0-9]{2}):([0-9]{2})(.[0-9]+)?(z|([+-][0-9]{2}:[0-9]{2}))$`
	base64RegexSize = 84   // govalidator's base64 pattern, as Kubernetes counts it
	urlRegexSize    = 1103 // govalidator's URL pattern, which Kubernetes sizes uri by
)

// namedFormat is a format as a CEL value; formats are equal by name.
type namedFormat struct {
	name         string
	validate     func(string) []string
	maxRegexSize int
}

// ConvertToNative implements ref.Val: formats have no native form.
func (f namedFormat) ConvertToNative(t reflect.Type) (any, error) {
	return nil, fmt.Errorf("type conversion error from 'Format' to '%v'", t)
}

// ConvertToType implements ref.Val.
func (f namedFormat) ConvertToType(t ref.Type) ref.Val { return convertOpaque(f, formatType, t) }

// Equal implements ref.Val.
func (f namedFormat) Equal(o ref.Val) ref.Val {
	return equalAs(o, func(of namedFormat) bool { return f.name == of.name })
}

// Type implements ref.Val.
func (f namedFormat) Type() ref.Type { return formatType }

// Value implements ref.Val.
func (f namedFormat) Value() any { return f }

// formatNames are the format names in Kubernetes' documentation order.
var formatNames = []string{
	"dns1123Label", "dns1123Subdomain", "dns1035Label", "qualifiedName",
	"dns1123LabelPrefix", "dns1123SubdomainPrefix", "dns1035LabelPrefix",
	"labelValue", "uri", "uuid", "byte", "date", "datetime",
}

// lookupFormat returns the format of a name, built afresh.
func lookupFormat(name string) (namedFormat, bool) {
	switch name {
	case "dns1123Label":
		return namedFormat{"DNS1123Label", meta.IsDNS1123Label, 30}, true
	case "dns1123Subdomain":
		return namedFormat{"DNS1123Subdomain", meta.IsDNS1123Subdomain, 60}, true
	case "dns1035Label":
		return namedFormat{"DNS1035Label", meta.IsDNS1035Label, 30}, true
	case "qualifiedName":
		return namedFormat{"QualifiedName", isLabelKey, 60}, true
	case "dns1123LabelPrefix":
		return namedFormat{"DNS1123LabelPrefix", asPrefix(meta.IsDNS1123Label), 30}, true
	case "dns1123SubdomainPrefix":
		return namedFormat{"DNS1123SubdomainPrefix", asPrefix(meta.IsDNS1123Subdomain), 60}, true
	case "dns1035LabelPrefix":
		return namedFormat{"DNS1035LabelPrefix", asPrefix(meta.IsDNS1035Label), 30}, true
	case "labelValue":
		return namedFormat{"LabelValue", isLabelValue, 40}, true
	case "uri":
		return namedFormat{"URI", validateURI, urlRegexSize}, true
	case "uuid":
		return namedFormat{"uuid", check(uuidRE.MatchString, "does not match the UUID format"), len(uuidPattern)}, true
	case "byte":
		return namedFormat{"byte", check(base64RE.MatchString, "invalid base64"), base64RegexSize}, true
	case "date":
		return namedFormat{"date", check(isDate, "invalid date"), len(timePattern)}, true
	case "datetime":
		return namedFormat{"datetime", check(isDateTime, "invalid datetime"), len(timePattern)}, true
	}
	return namedFormat{}, false
}

func formatLib() *library {
	opts := []cel.EnvOption{
		cel.Function("validate", cel.MemberOverload("format-validate",
			[]*cel.Type{formatType, cel.StringType}, cel.OptionalType(cel.ListType(cel.StringType)),
			binary(validateFormat))),
		cel.Function("format.named", cel.Overload("format-named",
			[]*cel.Type{cel.StringType}, cel.OptionalType(formatType), onString(formatNamed))),
	}
	for _, name := range formatNames {
		f, _ := lookupFormat(name)
		fn := "format." + name
		opts = append(opts, cel.Function(fn, cel.Overload(fn, nil, formatType,
			cel.FunctionBinding(func(...ref.Val) ref.Val { return f }))))
	}
	return &library{name: "kubernetes.format", options: opts}
}

func formatNamed(name string) ref.Val {
	f, ok := lookupFormat(name)
	if !ok {
		return types.OptionalNone
	}
	return types.OptionalOf(f)
}

func validateFormat(f namedFormat, s types.String) ref.Val {
	if errs := f.validate(string(s)); len(errs) > 0 {
		return types.OptionalOf(types.NewStringList(types.DefaultTypeAdapter, errs))
	}
	return types.OptionalNone
}

// asPrefix validates a generateName-style prefix: as in Kubernetes, a
// trailing '-' and the character before it are replaced by an 'a' before
// the name rule runs.
func asPrefix(rule func(string) []string) func(string) []string {
	return func(s string) []string {
		if len(s) > 1 && strings.HasSuffix(s, "-") {
			s = s[:len(s)-2] + "a"
		}
		return rule(s)
	}
}

// isLabelKey is Kubernetes 1.36's qualified-name check (content.IsLabelKey):
// meta.IsQualifiedName's rules with 1.36's wording, which calls the value a
// label key and measures lengths in bytes.
func isLabelKey(s string) []string {
	return relabel(meta.IsQualifiedName(s), "a qualified name ", "a valid label key ")
}

// isLabelValue is Kubernetes 1.36's label value check (content.IsLabelValue),
// whose length message counts bytes.
func isLabelValue(s string) []string {
	return relabel(meta.IsValidLabelValue(s), "", "")
}

// relabel rewrites meta's messages into 1.36's: a leading from becomes to,
// and a length limit in characters becomes one in bytes.
func relabel(msgs []string, from, to string) []string {
	for i, m := range msgs {
		if from != "" && strings.HasPrefix(m, from) {
			m = to + m[len(from):]
		}
		if strings.Contains(m, "must be no more than ") && strings.HasSuffix(m, " characters") {
			m = strings.TrimSuffix(m, " characters") + " bytes"
		}
		msgs[i] = m
	}
	return msgs
}

// validateURI is the uri format: what url() accepts, with Go's error.
func validateURI(s string) []string {
	if _, err := url.ParseRequestURI(s); err != nil {
		return []string{err.Error()}
	}
	return nil
}

func check(valid func(string) bool, msg string) func(string) []string {
	return func(s string) []string {
		if valid(s) {
			return nil
		}
		return []string{msg}
	}
}

// isDate is strfmt's date: an RFC 3339 full-date.
func isDate(s string) bool {
	_, err := time.Parse("2006-01-02", s)
	return err == nil
}

// The compiled strfmt patterns (immutable, safe for concurrent use).
var (
	uuidRE   = regexp.MustCompile(uuidPattern)
	base64RE = regexp.MustCompile(base64Pattern)
	timeRE   = regexp.MustCompile(timePattern)
)

// isDateTime is strfmt's date-time check: a date, a 't' (any case), and a
// time whose hour, minute and second compare no higher than 23, 59 and 59.
func isDateTime(s string) bool {
	if len(s) < 4 {
		return false
	}
	parts := strings.Split(strings.ToLower(s), "t")
	if len(parts) < 2 || !isDate(parts[0]) {
		return false
	}
	m := timeRE.FindStringSubmatch(parts[1])
	return m != nil && m[1] <= "23" && m[2] <= "59" && m[3] <= "59"
}
