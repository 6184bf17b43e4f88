package meta

import (
	"fmt"
	"sort"
	"strings"
)

// Name and label validation, with Kubernetes' rules and messages. The Is*
// functions return one message per problem (nil when valid); the messages
// become the detail of Invalid field errors.

// Length limits, as Kubernetes defines them.
const (
	// DNS1123LabelMaxLength is the longest RFC 1123 label.
	DNS1123LabelMaxLength = 63
	// DNS1123SubdomainMaxLength is the longest RFC 1123 subdomain.
	DNS1123SubdomainMaxLength = 253
	// QualifiedNameMaxLength is the longest name part of a qualified name.
	QualifiedNameMaxLength = 63
	// LabelValueMaxLength is the longest label value.
	LabelValueMaxLength = 63
	// TotalAnnotationSizeLimit is the largest total size of an object's
	// annotations (keys and values), in bytes.
	TotalAnnotationSizeLimit = 256 << 10
	// GeneratedNameSuffixLength is the length of the random suffix the
	// server appends to metadata.generateName.
	GeneratedNameSuffixLength = 5
	// FieldManagerMaxLength is the longest field manager name.
	FieldManagerMaxLength = 128
)

const (
	dns1123LabelFmt      = "[a-z0-9]([-a-z0-9]*[a-z0-9])?"
	dns1123LabelErrMsg   = "a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', and must start and end with an alphanumeric character"
	dns1123SubdomainFmt  = dns1123LabelFmt + "(\\." + dns1123LabelFmt + ")*"
	dns1123SubdomainMsg  = "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character"
	dns1035LabelFmt      = "[a-z]([-a-z0-9]*[a-z0-9])?"
	dns1035LabelErrMsg   = "a DNS-1035 label must consist of lower case alphanumeric characters or '-', start with an alphabetic character, and end with an alphanumeric character"
	qnameCharFmt         = "[A-Za-z0-9]"
	qnameExtCharFmt      = "[-A-Za-z0-9_.]"
	qualifiedNameFmt     = "(" + qnameCharFmt + qnameExtCharFmt + "*)?" + qnameCharFmt
	qualifiedNameErrMsg  = "must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character"
	labelValueFmt        = "(" + qualifiedNameFmt + ")?"
	labelValueErrMsg     = "a valid label must be an empty string or consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character"
	isNegativeErrorMsg   = "must be greater than or equal to 0"
	finalizerOrphan      = "orphan"
	finalizerForeground  = "foregroundDeletion"
	managedFieldsApply   = "Apply"
	managedFieldsUpdate  = "Update"
	managedFieldsTypeV1  = "FieldsV1"
	qualifiedNameExample = " with an optional DNS subdomain prefix and '/' (e.g. 'example.com/MyName')"
)

func maxLenError(n int) string { return fmt.Sprintf("must be no more than %d characters", n) }

// regexError renders a regexp failure the way Kubernetes does:
// "<msg> (e.g. 'a' or 'b', regex used for validation is '<re>')".
func regexError(msg, re string, examples ...string) string {
	if len(examples) == 0 {
		return msg + " (regex used for validation is '" + re + "')"
	}
	var b strings.Builder
	b.WriteString(msg)
	b.WriteString(" (e.g. ")
	for i, e := range examples {
		if i > 0 {
			b.WriteString(" or ")
		}
		b.WriteString("'" + e + "', ")
	}
	b.WriteString("regex used for validation is '" + re + "')")
	return b.String()
}

// IsDNS1123Subdomain checks a lowercase RFC 1123 subdomain (at most 253
// characters of [a-z0-9-.], starting and ending with an alphanumeric
// character), the default rule for object names.
func IsDNS1123Subdomain(value string) []string {
	var errs []string
	if len(value) > DNS1123SubdomainMaxLength {
		errs = append(errs, maxLenError(DNS1123SubdomainMaxLength))
	}
	if !matchDNS1123Subdomain(value) {
		errs = append(errs, regexError(dns1123SubdomainMsg, dns1123SubdomainFmt, "example.com"))
	}
	return errs
}

// IsDNS1123Label checks a lowercase RFC 1123 label (at most 63 characters of
// [a-z0-9-], starting and ending with an alphanumeric character), the rule
// for namespace names.
func IsDNS1123Label(value string) []string {
	var errs []string
	if len(value) > DNS1123LabelMaxLength {
		errs = append(errs, maxLenError(DNS1123LabelMaxLength))
	}
	if !matchDNS1123Label(value) {
		if matchDNS1123Subdomain(value) {
			errs = append(errs, "must not contain dots")
		} else {
			errs = append(errs, regexError(dns1123LabelErrMsg, dns1123LabelFmt, "my-name", "123-abc"))
		}
	}
	return errs
}

// IsDNS1035Label checks an RFC 1035 label (at most 63 characters of
// [a-z0-9-], starting with a letter and ending with an alphanumeric
// character).
func IsDNS1035Label(value string) []string {
	var errs []string
	if len(value) > DNS1123LabelMaxLength {
		errs = append(errs, maxLenError(DNS1123LabelMaxLength))
	}
	if !matchDNS1035Label(value) {
		errs = append(errs, regexError(dns1035LabelErrMsg, dns1035LabelFmt, "my-name", "abc-123"))
	}
	return errs
}

// IsValidPathSegmentName checks that a name can be a URL path segment: not
// "." or "..", and without "/" or "%".
func IsValidPathSegmentName(value string) []string {
	for _, bad := range []string{".", ".."} {
		if value == bad {
			return []string{fmt.Sprintf("may not be '%s'", bad)}
		}
	}
	return isValidPathSegmentPrefix(value)
}

func isValidPathSegmentPrefix(value string) []string {
	var errs []string
	for _, bad := range []string{"/", "%"} {
		if strings.Contains(value, bad) {
			errs = append(errs, fmt.Sprintf("may not contain '%s'", bad))
		}
	}
	return errs
}

// IsQualifiedName checks a qualified name, the rule for label and
// annotation keys and finalizers: an optional DNS subdomain prefix and "/",
// then a name of at most 63 characters of [A-Za-z0-9-_.] starting and ending
// with an alphanumeric character.
func IsQualifiedName(value string) []string {
	var errs []string
	parts := strings.Split(value, "/")
	var name string
	switch len(parts) {
	case 1:
		name = parts[0]
	case 2:
		var prefix string
		prefix, name = parts[0], parts[1]
		if prefix == "" {
			errs = append(errs, "prefix part must be non-empty")
		} else {
			for _, msg := range IsDNS1123Subdomain(prefix) {
				errs = append(errs, "prefix part "+msg)
			}
		}
	default:
		return append(errs, "a qualified name "+regexError(qualifiedNameErrMsg, qualifiedNameFmt, "MyName", "my.name", "123-abc")+qualifiedNameExample)
	}
	if name == "" {
		errs = append(errs, "name part must be non-empty")
	} else if len(name) > QualifiedNameMaxLength {
		errs = append(errs, "name part "+maxLenError(QualifiedNameMaxLength))
	}
	if !matchQualifiedName(name) {
		errs = append(errs, "name part "+regexError(qualifiedNameErrMsg, qualifiedNameFmt, "MyName", "my.name", "123-abc"))
	}
	return errs
}

// IsValidLabelValue checks a label value: empty, or at most 63 characters
// of [A-Za-z0-9-_.] starting and ending with an alphanumeric character.
func IsValidLabelValue(value string) []string {
	var errs []string
	if len(value) > LabelValueMaxLength {
		errs = append(errs, maxLenError(LabelValueMaxLength))
	}
	if !matchLabelValue(value) {
		errs = append(errs, regexError(labelValueErrMsg, labelValueFmt, "MyValue", "my_value", "12345"))
	}
	return errs
}

// ValidateGenerateName checks a metadata.generateName prefix with the rule
// that applies to names. As in Kubernetes, a trailing '-' is allowed (it is
// checked as if it were an alphanumeric character), and the prefix is
// checked on its own: the server shortens a long prefix so that prefix plus
// the GeneratedNameSuffixLength-character suffix fits.
func ValidateGenerateName(prefix string, nameRule func(string) []string) []string {
	if len(prefix) > 1 && strings.HasSuffix(prefix, "-") {
		prefix = prefix[:len(prefix)-1] + "a"
	}
	return nameRule(prefix)
}

// ValidateLabels checks label keys (qualified names) and values. Errors are
// reported on path (Kubernetes does not index them by key), in key order.
func ValidateLabels(labels map[string]string, path *Path) ErrorList {
	var errs ErrorList
	for _, k := range sortedStringKeys(labels) {
		for _, msg := range IsQualifiedName(k) {
			errs = append(errs, Invalid(path, k, msg))
		}
		for _, msg := range IsValidLabelValue(labels[k]) {
			errs = append(errs, Invalid(path, labels[k], msg))
		}
	}
	return errs
}

// ValidateAnnotations checks annotation keys (qualified names, case
// insensitively) and the total size of keys and values
// (TotalAnnotationSizeLimit).
func ValidateAnnotations(annotations map[string]string, path *Path) ErrorList {
	var errs ErrorList
	total := 0
	for _, k := range sortedStringKeys(annotations) {
		for _, msg := range IsQualifiedName(strings.ToLower(k)) {
			errs = append(errs, Invalid(path, k, msg))
		}
		total += len(k) + len(annotations[k])
	}
	if total > TotalAnnotationSizeLimit {
		errs = append(errs, TooLong(path, "", TotalAnnotationSizeLimit))
	}
	return errs
}

func sortedStringKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}
