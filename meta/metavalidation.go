package meta

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"
	"time"
	"unicode"

	"github.com/kapi-dev/kapi/codec"
)

// ValidateObjectMeta checks the metadata of an object in generic form (the
// value of its "metadata" field) as Kubernetes does:
//
//   - every known field has the right JSON type;
//   - name is required (the server has turned generateName into a name by
//     now) and must satisfy nameRule, as must the generateName prefix (see
//     ValidateGenerateName);
//   - namespace is required and a DNS-1123 label for namespaced types, and
//     forbidden for cluster-scoped ones;
//   - generation is not negative;
//   - labels, annotations and finalizers are valid (finalizers are
//     qualified names; "orphan" and "foregroundDeletion" exclude each
//     other);
//   - ownerReferences have apiVersion (with a version), kind, name and uid,
//     and at most one has controller: true;
//   - managedFields entries have operation Apply or Update and fieldsType
//     FieldsV1.
//
// nameRule returns one message per problem (IsDNS1123Subdomain when nil).
// Errors are reported below path (usually NewPath("metadata")).
func ValidateObjectMeta(md map[string]any, namespaced bool, nameRule func(string) []string, path *Path) ErrorList {
	if nameRule == nil {
		nameRule = IsDNS1123Subdomain
	}
	v := metaValidator{md: md, path: path}

	if gn, ok := v.str("generateName"); ok && gn != "" {
		for _, msg := range ValidateGenerateName(gn, nameRule) {
			v.add(Invalid(path.Child("generateName"), gn, msg))
		}
	}
	if name, ok := v.str("name"); ok {
		if name == "" {
			v.add(Required(path.Child("name"), "name or generateName is required"))
		} else {
			for _, msg := range nameRule(name) {
				v.add(Invalid(path.Child("name"), name, msg))
			}
		}
	}
	if ns, ok := v.str("namespace"); ok {
		switch {
		case namespaced && ns == "":
			v.add(Required(path.Child("namespace"), ""))
		case namespaced:
			for _, msg := range IsDNS1123Label(ns) {
				v.add(Invalid(path.Child("namespace"), ns, msg))
			}
		case ns != "":
			v.add(Forbidden(path.Child("namespace"), "not allowed on this type"))
		}
	}
	v.str("uid")
	v.str("resourceVersion")
	if g, ok := v.integer("generation"); ok && g < 0 {
		v.add(Invalid(path.Child("generation"), g, isNegativeErrorMsg))
	}
	if g, ok := v.integer("deletionGracePeriodSeconds"); ok && g < 0 {
		v.add(Invalid(path.Child("deletionGracePeriodSeconds"), g, isNegativeErrorMsg))
	}
	v.timestamp("creationTimestamp")
	v.timestamp("deletionTimestamp")
	if labels, ok := v.stringMap("labels"); ok && !labelsValid(labels) {
		v.errs = append(v.errs, ValidateLabels(asStrings(labels), path.Child("labels"))...)
	}
	if ann, ok := v.stringMap("annotations"); ok && !annotationsValid(ann) {
		v.errs = append(v.errs, ValidateAnnotations(asStrings(ann), path.Child("annotations"))...)
	}
	if fin, ok := v.stringSlice("finalizers"); ok {
		v.finalizers(fin)
	}
	if refs, ok := v.objectSlice("ownerReferences"); ok {
		v.ownerReferences(refs)
	}
	if mf, ok := v.objectSlice("managedFields"); ok {
		v.managedFields(mf)
	}
	return v.errs
}

type metaValidator struct {
	md   map[string]any
	path *Path
	errs ErrorList
}

func (v *metaValidator) add(e *FieldError) { v.errs = append(v.errs, e) }

// typeError reports a value of the wrong JSON type, worded like schema
// validation errors.
func typeError(p *Path, value any, want string) *FieldError {
	got := jsonTypeName(value)
	return TypeInvalid(p, got, fmt.Sprintf("%s in body must be of type %s: %q", p.String(), want, got))
}

func jsonTypeName(v any) string {
	switch t := v.(type) {
	case nil:
		return "null"
	case bool:
		return "boolean"
	case string:
		return "string"
	case map[string]any:
		return "object"
	case []any:
		return "array"
	case json.RawMessage:
		return rawJSONTypeName(t)
	}
	if _, ok := AsInt64(v); ok {
		return "integer"
	}
	if IsNumber(v) {
		return "number"
	}
	return fmt.Sprintf("%T", v)
}

// field returns md[key]; ok is false when absent or null.
func (v *metaValidator) field(key string) (any, bool) {
	x, ok := v.md[key]
	return x, ok && x != nil
}

// str returns a string field; a missing name or namespace reads as "" with
// ok true so that presence rules apply.
func (v *metaValidator) str(key string) (string, bool) {
	x, ok := v.field(key)
	if !ok {
		return "", key == "name" || key == "namespace"
	}
	s, isStr := x.(string)
	if !isStr {
		v.add(typeError(v.path.Child(key), x, "string"))
		return "", false
	}
	return s, true
}

func (v *metaValidator) integer(key string) (int64, bool) {
	x, ok := v.field(key)
	if !ok {
		return 0, false
	}
	i, isInt := AsInt64(x)
	if !isInt {
		v.add(typeError(v.path.Child(key), x, "integer"))
		return 0, false
	}
	return i, true
}

func (v *metaValidator) timestamp(key string) {
	x, ok := v.field(key)
	if !ok {
		return
	}
	s, isStr := x.(string)
	if !isStr {
		v.add(typeError(v.path.Child(key), x, "string"))
		return
	}
	if _, err := time.Parse(TimeFormat, s); err != nil { // as Time.UnmarshalJSON reads a string
		v.add(Invalid(v.path.Child(key), s, "must be an RFC 3339 date-time"))
	}
}

// stringMap returns the object at key when every value in it is a string;
// otherwise it reports each non-string value (in key order) and returns
// false.
func (v *metaValidator) stringMap(key string) (map[string]any, bool) {
	x, ok := v.field(key)
	if !ok {
		return nil, false
	}
	m, isMap := x.(map[string]any)
	if !isMap {
		v.add(typeError(v.path.Child(key), x, "object"))
		return nil, false
	}
	allStrings := true
	for _, e := range m {
		if _, isStr := e.(string); !isStr {
			allStrings = false
			break
		}
	}
	if allStrings {
		return m, true
	}
	for _, k := range sortedStringKeys(m) {
		if _, isStr := m[k].(string); !isStr {
			v.add(typeError(v.path.Child(key).Key(k), m[k], "string"))
		}
	}
	return nil, false
}

// asStrings copies a map whose values are all strings (see stringMap).
func asStrings(m map[string]any) map[string]string {
	out := make(map[string]string, len(m))
	for k, e := range m {
		out[k], _ = e.(string)
	}
	return out
}

// labelsValid reports whether ValidateLabels would find nothing wrong with
// labels (whose values are strings), without its copy and sorting: the
// common case. A false sends them through ValidateLabels for the errors.
func labelsValid(labels map[string]any) bool {
	for k, e := range labels {
		val, _ := e.(string)
		if IsQualifiedName(k) != nil || IsValidLabelValue(val) != nil {
			return false
		}
	}
	return true
}

// annotationsValid is labelsValid for ValidateAnnotations.
func annotationsValid(annotations map[string]any) bool {
	total := 0
	for k, e := range annotations {
		val, _ := e.(string)
		if IsQualifiedName(strings.ToLower(k)) != nil {
			return false
		}
		total += len(k) + len(val)
	}
	return total <= TotalAnnotationSizeLimit
}

func (v *metaValidator) stringSlice(key string) ([]string, bool) {
	x, ok := v.field(key)
	if !ok {
		return nil, false
	}
	s, isSlice := x.([]any)
	if !isSlice {
		v.add(typeError(v.path.Child(key), x, "array"))
		return nil, false
	}
	out := make([]string, 0, len(s))
	valid := true
	for i, e := range s {
		str, isStr := e.(string)
		if !isStr {
			v.add(typeError(v.path.Child(key).Index(i), e, "string"))
			valid = false
			continue
		}
		out = append(out, str)
	}
	return out, valid
}

func (v *metaValidator) objectSlice(key string) ([]map[string]any, bool) {
	x, ok := v.field(key)
	if !ok {
		return nil, false
	}
	s, isSlice := x.([]any)
	if !isSlice {
		v.add(typeError(v.path.Child(key), x, "array"))
		return nil, false
	}
	out := make([]map[string]any, 0, len(s))
	valid := true
	for i, e := range s {
		m, isMap := e.(map[string]any)
		if !isMap {
			v.add(typeError(v.path.Child(key).Index(i), e, "object"))
			valid = false
			continue
		}
		out = append(out, m)
	}
	return out, valid
}

func (v *metaValidator) finalizers(fin []string) {
	p := v.path.Child("finalizers")
	orphan, foreground := false, false
	for _, f := range fin {
		for _, msg := range IsQualifiedName(f) {
			v.add(Invalid(p, f, msg))
		}
		orphan = orphan || f == finalizerOrphan
		foreground = foreground || f == finalizerForeground
	}
	if orphan && foreground {
		v.add(Invalid(p, fin, fmt.Sprintf("finalizer %s and %s cannot be both set", finalizerOrphan, finalizerForeground)))
	}
}

// entry checks the types of the fields of one entry of a list of objects:
// out[i] is set to the string field strs[i] ("" when absent). p is the
// entry's path, built only for an error.
func (v *metaValidator) entry(p func() *Path, m map[string]any, strs []string, out []string, bools []string) bool {
	valid := true
	for i, k := range strs {
		x, ok := m[k]
		if !ok || x == nil {
			continue
		}
		s, isStr := x.(string)
		if !isStr {
			v.add(typeError(p().Child(k), x, "string"))
			valid = false
			continue
		}
		out[i] = s
	}
	for _, k := range bools {
		if x, ok := m[k]; ok && x != nil {
			if _, isBool := x.(bool); !isBool {
				v.add(typeError(p().Child(k), x, "boolean"))
				valid = false
			}
		}
	}
	return valid
}

// The string and boolean fields of an owner reference and of a
// managedFields entry, in the order entry fills them.
var (
	ownerRefStrings      = []string{"apiVersion", "kind", "name", "uid"}
	ownerRefBools        = []string{"controller", "blockOwnerDeletion"}
	managedFieldsStrings = []string{"manager", "operation", "apiVersion", "fieldsType", "subresource", "time"}
)

func (v *metaValidator) ownerReferences(refs []map[string]any) {
	base := v.path.Child("ownerReferences")
	firstController := ""
	for i, ref := range refs {
		p := base.Index(i)
		var f [4]string // ownerRefStrings
		if !v.entry(func() *Path { return p }, ref, ownerRefStrings, f[:], ownerRefBools) {
			continue
		}
		apiVersion, kind, name := f[0], f[1], f[2]
		gv, ok := ParseGroupVersion(apiVersion)
		if !ok || gv.Version == "" {
			v.add(Invalid(p.Child("apiVersion"), apiVersion, "version must not be empty"))
		}
		for j, k := range ownerRefStrings[1:] {
			if f[j+1] == "" {
				v.add(Invalid(p.Child(k), f[j+1], "must not be empty"))
			}
		}
		if c, _ := ref["controller"].(bool); c {
			cur := kind + "/" + name
			if firstController != "" {
				v.add(Invalid(base, fmt.Sprintf("%s and %s", firstController, cur),
					fmt.Sprintf("Only one reference can have Controller set to true. Found \"true\" in references for %s and %s", firstController, cur)))
			} else {
				firstController = cur
			}
		}
	}
}

func (v *metaValidator) managedFields(entries []map[string]any) {
	// Paths are built only for errors: every create and update validates
	// the entries the server itself wrote.
	for i, e := range entries {
		p := func() *Path { return v.path.Child("managedFields").Index(i) }
		var f [6]string // managedFieldsStrings
		if !v.entry(p, e, managedFieldsStrings, f[:], nil) {
			continue
		}
		manager, operation, fieldsType := f[0], f[1], f[3]
		switch operation {
		case managedFieldsApply, managedFieldsUpdate:
		default:
			v.add(Invalid(p().Child("operation"), operation, "must be `Apply` or `Update`"))
		}
		if fieldsType != "" && fieldsType != managedFieldsTypeV1 {
			v.add(Invalid(p().Child("fieldsType"), fieldsType, "must be `FieldsV1`"))
		}
		if len(manager) > FieldManagerMaxLength {
			v.add(TooLong(p().Child("manager"), manager, FieldManagerMaxLength))
		} else if strings.IndexFunc(manager, func(r rune) bool { return !unicode.IsPrint(r) }) >= 0 {
			v.add(Invalid(p().Child("manager"), manager, "must only contain printable characters"))
		}
		if x, ok := e["fieldsV1"]; ok && x != nil && !isJSONObject(x) {
			v.add(typeError(p().Child("fieldsV1"), x, "object"))
		}
	}
}

// isJSONObject reports whether x is a generic JSON object: a map, or the
// JSON text of an object (the field manager records a create's fieldsV1 as
// a json.RawMessage).
func isJSONObject(x any) bool {
	switch x := x.(type) {
	case map[string]any:
		return true
	case json.RawMessage:
		if codec.IsFieldsJSON(x) {
			return true // what the field manager writes: no full validation
		}
		t := bytes.TrimLeft(x, " \t\r\n")
		return len(t) > 0 && t[0] == '{' && json.Valid(t)
	}
	return false
}

// rawJSONTypeName is jsonTypeName of the value JSON text holds.
func rawJSONTypeName(raw json.RawMessage) string {
	t := bytes.TrimLeft(raw, " \t\r\n")
	if !json.Valid(t) || len(t) == 0 {
		return "invalid JSON"
	}
	switch t[0] {
	case '{':
		return "object"
	case '[':
		return "array"
	case '"':
		return "string"
	case 't', 'f':
		return "boolean"
	case 'n':
		return "null"
	}
	return "number"
}
