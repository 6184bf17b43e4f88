package meta

import (
	"encoding/json"
	"fmt"
	"reflect"
	"strconv"
	"strings"
)

// Path is a field path inside an object, such as spec.ports[2] or
// metadata.labels[app]. Paths are immutable: every builder method returns a
// new Path and leaves its receiver unchanged, so a parent path can be shared
// by many children. The nil *Path is the empty root: (*Path)(nil).Child("spec")
// is the path "spec".
type Path struct {
	parent *Path
	name   string // a field name, or the key of a key element
	elem   pathElem
	index  int // of an index element
}

// pathElem is what an element of a Path is.
type pathElem uint8

const (
	elemField pathElem = iota
	elemKey
	elemIndex
)

// NewPath returns the path made of the given field names (NewPath("spec",
// "size") is spec.size).
func NewPath(name string, more ...string) *Path {
	return (*Path)(nil).Child(name, more...)
}

// Child returns the path of a field (and optionally its nested fields) below p.
func (p *Path) Child(name string, more ...string) *Path {
	c := &Path{parent: p, name: name}
	for _, m := range more {
		c = &Path{parent: c, name: m}
	}
	return c
}

// Index returns the path of the i-th element of the list at p.
func (p *Path) Index(i int) *Path {
	return &Path{parent: p, elem: elemIndex, index: i}
}

// Key returns the path of the entry with key k of the map at p. Kubernetes
// renders keys unquoted: metadata.labels[app].
func (p *Path) Key(k string) *Path {
	return &Path{parent: p, name: k, elem: elemKey}
}

// String renders the path as Kubernetes does: names joined by ".", indices and
// keys in brackets ("spec.ports[2].name", "metadata.labels[app]"). The empty
// path renders as "".
func (p *Path) String() string {
	if p == nil {
		return ""
	}
	return string(p.appendTo(make([]byte, 0, 64)))
}

// appendTo appends the rendered path to b. It keeps no pointer to p, so a
// path built on the stack stays there.
func (p *Path) appendTo(b []byte) []byte {
	if p == nil {
		return b
	}
	b = p.parent.appendTo(b)
	switch p.elem {
	case elemKey:
		b = append(append(append(b, '['), p.name...), ']')
	case elemIndex:
		b = append(strconv.AppendInt(append(b, '['), int64(p.index), 10), ']')
	default:
		if len(b) > 0 {
			b = append(b, '.')
		}
		b = append(b, p.name...)
	}
	return b
}

// FieldError is a problem with one field of an object, in the shape of
// Kubernetes' field.Error. Its Type becomes the reason of a StatusCause.
type FieldError struct {
	// Type is the kind of problem, e.g. CauseTypeFieldValueInvalid.
	Type CauseType
	// Field is the rendered field path, e.g. "spec.ports[0].port".
	Field string
	// BadValue is the offending value; it is not shown for Required,
	// Forbidden, TooLong and Internal errors.
	BadValue any
	// Detail explains the problem (may be empty).
	Detail string
}

// omitValue is a BadValue that is not rendered.
type omitValue struct{}

// Omitted is a BadValue that is not rendered: "Invalid value: <detail>", as
// Kubernetes reports a failed rule on an object or a list.
func Omitted() any { return omitValue{} }

// Error renders the error as "<field>: <body>", the way Kubernetes does.
func (e *FieldError) Error() string {
	return e.Field + ": " + e.ErrorBody()
}

// typeString is the human-readable name of a cause type, as Kubernetes
// renders it in messages.
func typeString(t CauseType) string {
	switch t {
	case CauseTypeFieldValueNotFound:
		return "Not found"
	case CauseTypeFieldValueRequired:
		return "Required value"
	case CauseTypeFieldValueDuplicate:
		return "Duplicate value"
	case CauseTypeFieldValueInvalid, CauseTypeTypeInvalid:
		return "Invalid value"
	case CauseTypeFieldValueNotSupported:
		return "Unsupported value"
	case CauseTypeFieldValueForbidden:
		return "Forbidden"
	case CauseTypeFieldValueTooLong:
		return "Too long"
	case CauseTypeTooMany:
		return "Too many"
	case CauseTypeInternal:
		return "Internal error"
	default:
		return string(t)
	}
}

// ErrorBody renders the error without its field path; it is the message of
// the error's StatusCause. Values are rendered as Kubernetes renders them:
// strings quoted, numbers and booleans bare, nil as null; composite values
// (maps, slices) are rendered as JSON.
func (e *FieldError) ErrorBody() string {
	s := typeString(e.Type)
	switch e.Type {
	case CauseTypeFieldValueRequired, CauseTypeFieldValueForbidden,
		CauseTypeFieldValueTooLong, CauseTypeInternal:
	default:
		if _, omit := e.BadValue.(omitValue); !omit {
			s += ": " + formatValue(e.BadValue)
		}
	}
	if e.Detail != "" {
		s += ": " + e.Detail
	}
	return s
}

// formatValue renders a bad value for a message.
func formatValue(v any) string {
	if v == nil {
		return "null"
	}
	rv := reflect.ValueOf(v)
	if rv.Kind() == reflect.Pointer {
		if rv.IsNil() {
			return "null"
		}
		v = rv.Elem().Interface()
	}
	switch t := v.(type) {
	case string:
		return strconv.Quote(t)
	case json.Number:
		return t.String()
	case bool, int, int8, int16, int32, int64, uint, uint8, uint16, uint32, uint64, float32, float64:
		return fmt.Sprint(t)
	case map[string]any, []any, map[string]string, []string:
		if b, err := json.Marshal(t); err == nil {
			return string(b)
		}
		return fmt.Sprintf("%#v", t)
	case fmt.Stringer:
		return t.String()
	default:
		return fmt.Sprintf("%#v", t)
	}
}

// NotFound reports that a referenced value does not exist.
func NotFound(path *Path, value any) *FieldError {
	return &FieldError{Type: CauseTypeFieldValueNotFound, Field: path.String(), BadValue: value}
}

// Required reports a missing required value; detail may be empty.
func Required(path *Path, detail string) *FieldError {
	return &FieldError{Type: CauseTypeFieldValueRequired, Field: path.String(), BadValue: "", Detail: detail}
}

// Duplicate reports a value that must be unique but is not.
func Duplicate(path *Path, value any) *FieldError {
	return &FieldError{Type: CauseTypeFieldValueDuplicate, Field: path.String(), BadValue: value}
}

// Invalid reports a value that is malformed or out of range.
func Invalid(path *Path, value any, detail string) *FieldError {
	return &FieldError{Type: CauseTypeFieldValueInvalid, Field: path.String(), BadValue: value, Detail: detail}
}

// TypeInvalid reports a value of the wrong type (it renders as "Invalid
// value", like Kubernetes, but its cause reason is FieldValueTypeInvalid).
func TypeInvalid(path *Path, value any, detail string) *FieldError {
	return &FieldError{Type: CauseTypeTypeInvalid, Field: path.String(), BadValue: value, Detail: detail}
}

// NotSupported reports a value outside a fixed set; the detail lists the
// supported values, quoted ("supported values: \"red\", \"blue\"").
func NotSupported(path *Path, value any, valid []string) *FieldError {
	detail := ""
	if len(valid) > 0 {
		q := make([]string, len(valid))
		for i, v := range valid {
			q[i] = strconv.Quote(v)
		}
		detail = "supported values: " + strings.Join(q, ", ")
	}
	return &FieldError{Type: CauseTypeFieldValueNotSupported, Field: path.String(), BadValue: value, Detail: detail}
}

// Forbidden reports a field that may not be set (or not to this value) in
// this context.
func Forbidden(path *Path, detail string) *FieldError {
	return &FieldError{Type: CauseTypeFieldValueForbidden, Field: path.String(), BadValue: "", Detail: detail}
}

// TooLong reports a value longer than maxLength bytes; a negative maxLength
// means the limit is unknown. The value itself is not rendered.
func TooLong(path *Path, value any, maxLength int) *FieldError {
	detail := "value is too long"
	if maxLength >= 0 {
		unit := "bytes"
		if maxLength == 1 {
			unit = "byte"
		}
		detail = fmt.Sprintf("may not be more than %d %s", maxLength, unit)
	}
	return &FieldError{Type: CauseTypeFieldValueTooLong, Field: path.String(), BadValue: value, Detail: detail}
}

// TooMany reports a list or map with more than maxQuantity items; negative
// arguments mean unknown (an unknown actual quantity is not rendered).
func TooMany(path *Path, actualQuantity, maxQuantity int) *FieldError {
	detail := "has too many items"
	if maxQuantity >= 0 {
		unit := "items"
		if maxQuantity == 1 {
			unit = "item"
		}
		detail = fmt.Sprintf("must have at most %d %s", maxQuantity, unit)
	}
	var actual any = omitValue{}
	if actualQuantity >= 0 {
		actual = actualQuantity
	}
	return &FieldError{Type: CauseTypeTooMany, Field: path.String(), BadValue: actual, Detail: detail}
}

// Internal reports a server-side failure while checking a field.
func Internal(path *Path, err error) *FieldError {
	detail := ""
	if err != nil {
		detail = err.Error()
	}
	return &FieldError{Type: CauseTypeInternal, Field: path.String(), BadValue: nil, Detail: detail}
}

// ErrorList is a list of field errors. It is deliberately not an error
// itself (a nil ErrorList stored in an error would not be nil); use
// ToAggregate.
type ErrorList []*FieldError

// ToCauses converts the list to Status causes as Kubernetes does: the reason
// is the error type, the message is the error body (without the field), the
// field is the rendered path.
func (l ErrorList) ToCauses() []StatusCause {
	if len(l) == 0 {
		return nil
	}
	causes := make([]StatusCause, 0, len(l))
	for _, e := range l {
		causes = append(causes, StatusCause{Type: e.Type, Message: e.ErrorBody(), Field: e.Field})
	}
	return causes
}

// ToAggregate returns nil for an empty list and otherwise an error whose
// message is the single error's message, or for several errors their
// messages joined by ", " in brackets, as Kubernetes renders aggregates.
// Duplicate messages are reported once. errors.As finds the *FieldError
// members.
func (l ErrorList) ToAggregate() error {
	if len(l) == 0 {
		return nil
	}
	seen := make(map[string]bool, len(l))
	var uniq ErrorList
	for _, e := range l {
		if e == nil {
			continue
		}
		m := e.Error()
		if seen[m] {
			continue
		}
		seen[m] = true
		uniq = append(uniq, e)
	}
	if len(uniq) == 0 {
		return nil
	}
	return aggregate(uniq)
}

// aggregate is the error returned by ErrorList.ToAggregate.
type aggregate ErrorList

func (a aggregate) Error() string {
	if len(a) == 1 {
		return a[0].Error()
	}
	msgs := make([]string, len(a))
	for i, e := range a {
		msgs[i] = e.Error()
	}
	return "[" + strings.Join(msgs, ", ") + "]"
}

// Unwrap exposes the members to errors.Is and errors.As.
func (a aggregate) Unwrap() []error {
	errs := make([]error, len(a))
	for i, e := range a {
		errs[i] = e
	}
	return errs
}
