package codec

import (
	"errors"
	"fmt"
	"strconv"
	"strings"

	"google.golang.org/protobuf/encoding/protowire"
)

// Kind is the type of a protobuf field of a Message, with the JSON form it
// maps to.
type Kind uint8

// Field kinds. Each names the JSON value and the protobuf encoding; they
// cover the types of Kubernetes' generated.proto files.
const (
	// String is a JSON string and a protobuf string.
	String Kind = iota + 1
	// Bytes is a base64 JSON string and protobuf bytes.
	Bytes
	// Bool is a JSON boolean and a protobuf bool.
	Bool
	// Int32 is a JSON integer and a protobuf int32.
	Int32
	// Int64 is a JSON integer and a protobuf int64.
	Int64
	// Double is a JSON number and a protobuf double.
	Double
	// Time is an RFC 3339 JSON string (second precision) and a meta/v1 Time
	// message (seconds = 1, nanos = 2).
	Time
	// MicroTime is an RFC 3339 JSON string with microseconds and a meta/v1
	// MicroTime message (seconds = 1, nanos = 2).
	MicroTime
	// Quantity is a JSON string (or number) and a resource.Quantity message
	// (string = 1).
	Quantity
	// IntOrString is a JSON integer or string and an intstr.IntOrString
	// message (type = 1, intVal = 2, strVal = 3).
	IntOrString
	// RawJSON is any JSON value carried as its JSON text in field 1 of a
	// message: the shape of runtime.RawExtension and meta/v1 FieldsV1.
	RawJSON
	// MessageKind is a JSON object and a nested message (Field.Message).
	MessageKind
	// StringList is a JSON array of strings and a message holding them as
	// repeated string field 1: the shape of authentication/v1 ExtraValue.
	StringList
)

var kindNames = [...]string{String: "string", Bytes: "bytes", Bool: "bool", Int32: "int32", Int64: "int64", Double: "double",
	Time: "Time", MicroTime: "MicroTime", Quantity: "Quantity", IntOrString: "IntOrString", RawJSON: "RawJSON", MessageKind: "message", StringList: "StringList"}

func (k Kind) String() string {
	if int(k) < len(kindNames) && kindNames[k] != "" {
		return kindNames[k]
	}
	return "Kind(" + strconv.Itoa(int(k)) + ")"
}

// Field is one field of a Message: the JSON name of a generic object's field
// and the protobuf field it travels in.
type Field struct {
	// Name is the JSON field name, e.g. "metadata".
	Name string
	// Number is the protobuf field number.
	Number protowire.Number
	// Kind is the type of the value (of each element for Repeated, of each
	// value for Map).
	Kind Kind
	// Message describes the nested message for Kind MessageKind.
	Message *Message
	// Repeated maps a JSON array onto a repeated field.
	Repeated bool
	// Map maps a JSON object with string keys onto map<string, Kind>.
	Map bool
	// Keep keeps a zero value read from protobuf in the decoded object: set
	// it for optional pointer fields (Go *bool, *int64), whose presence
	// matters. Other zero values are left out, as JSON's omitempty does.
	Keep bool
}

// Message describes a protobuf message wire-compatible with a Kubernetes
// type, by the JSON names of its fields. It transcodes the JSON form of an
// object to protobuf and decodes protobuf into the generic form
// (map[string]any, as DecodeJSON returns). JSON fields the message does not
// describe are not encoded; unknown protobuf fields are skipped.
//
// A Message is immutable and safe for concurrent use.
type Message struct {
	name   string
	fields []Field
	byName map[string]int
	byNum  map[protowire.Number]int
}

// NewMessage returns the description of a message. It fails on an invalid
// description: duplicate names or numbers, a bad number, a message field
// without Message, or a field both Map and Repeated.
func NewMessage(name string, fields ...Field) (*Message, error) {
	m := &Message{name: name, fields: append([]Field(nil), fields...), byName: map[string]int{}, byNum: map[protowire.Number]int{}}
	for i, f := range m.fields {
		switch {
		case f.Name == "":
			return nil, fmt.Errorf("codec: message %s: field %d has no name", name, f.Number)
		case !f.Number.IsValid():
			return nil, fmt.Errorf("codec: message %s: field %s has invalid number %d", name, f.Name, f.Number)
		case f.Kind < String || f.Kind > StringList:
			return nil, fmt.Errorf("codec: message %s: field %s has invalid kind %d", name, f.Name, f.Kind)
		case (f.Kind == MessageKind) != (f.Message != nil):
			return nil, fmt.Errorf("codec: message %s: field %s: Message is set if and only if Kind is MessageKind", name, f.Name)
		case f.Map && f.Repeated:
			return nil, fmt.Errorf("codec: message %s: field %s is both Map and Repeated", name, f.Name)
		}
		if _, dup := m.byName[f.Name]; dup {
			return nil, fmt.Errorf("codec: message %s: duplicate field name %s", name, f.Name)
		}
		if _, dup := m.byNum[f.Number]; dup {
			return nil, fmt.Errorf("codec: message %s: duplicate field number %d", name, f.Number)
		}
		m.byName[f.Name] = i
		m.byNum[f.Number] = i
	}
	return m, nil
}

// MustMessage is NewMessage for descriptions known to be valid; it panics
// otherwise.
func MustMessage(name string, fields ...Field) *Message {
	m, err := NewMessage(name, fields...)
	if err != nil {
		panic(err)
	}
	return m
}

// Name returns the message name given to NewMessage.
func (m *Message) Name() string { return m.name }

// Fields returns a copy of the message's fields.
func (m *Message) Fields() []Field { return append([]Field(nil), m.fields...) }

// FieldError is an error about one field of a message, by JSON path.
type FieldError struct {
	Path string
	Err  error
}

func (e *FieldError) Error() string { return "field " + e.Path + ": " + e.Err.Error() }
func (e *FieldError) Unwrap() error { return e.Err }

func fieldErr(name string, err error) error {
	var fe *FieldError
	if errors.As(err, &fe) {
		sep := "."
		if strings.HasPrefix(fe.Path, "[") {
			sep = ""
		}
		return &FieldError{Path: name + sep + fe.Path, Err: fe.Err}
	}
	return &FieldError{Path: name, Err: err}
}
